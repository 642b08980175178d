-- Agent × team CSAT rollups per aligned block of 2^level days (level 0 to 9: one day to 512 days; a block starts on
-- a multiple of its length counted in days from 1970-01-01). Any range of n days is the sum of at most about
-- 2·log2(n) blocks, so an unfiltered 90-day report reads about a dozen rows per agent and team instead of one per
-- day. Level 0 is exactly the daily agent × team table, which this replaces together with the monthly one.

-- Rollup rows name their zone by a small number: with only fixed-width columns PostgreSQL reads index tuples at
-- cached offsets, which is most of the cost of summing them.
ALTER TABLE report_zones ADD COLUMN id smallint GENERATED ALWAYS AS IDENTITY UNIQUE;

CREATE TABLE csat_blocks (
    zone_id    smallint NOT NULL REFERENCES report_zones (id) ON DELETE CASCADE,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 9),
    first_day  date NOT NULL,
    agent_id   bigint NOT NULL,
    team_id    bigint NOT NULL,
    requests   integer NOT NULL DEFAULT 0,
    responses  integer NOT NULL DEFAULT 0,
    -- Counts of scores 1..5 (their sum and the score sum follow from them).
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    -- The counts ride in the key's index, so reports are index-only scans and writes keep a single index.
    PRIMARY KEY (zone_id, level, first_day, agent_id, team_id) INCLUDE (requests, responses, s1, s2, s3, s4, s5)
);

-- Carries the existing rollups over: every level summed from the daily agent × team rows.
INSERT INTO csat_blocks (zone_id, level, first_day, agent_id, team_id, requests, responses, s1, s2, s3, s4, s5)
SELECT z.id, level, date '1970-01-01' + (((d.day - date '1970-01-01') >> level) << level), d.agent_id, d.team_id,
       sum(d.requests), sum(d.responses), sum(d.s1), sum(d.s2), sum(d.s3), sum(d.s4), sum(d.s5)
  FROM csat_daily_agent d JOIN report_zones z ON z.zone = d.zone CROSS JOIN generate_series(0, 9) AS level
 GROUP BY 1, 2, 3, 4, 5;

DROP TABLE csat_daily_agent, csat_monthly_agent;
