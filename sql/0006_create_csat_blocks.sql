-- CSAT rollups per aligned block of 2^level local days (level 0 to 9: one day to 512 days; a block starts on a
-- multiple of its length counted in days from 1970-01-01). Any range of n days is the sum of at most about
-- 2·log2(n) blocks, so a 90-day report reads about a dozen rows per group instead of one per day. Level 0 holds
-- exactly the daily rollups these tables replace. The scored count and the score sum follow from the counts of each
-- score, so only those are kept.

-- Rollup rows name their zone by a small number: fixed-width leading columns let PostgreSQL read index tuples at
-- cached offsets, which is most of the cost of summing them.
ALTER TABLE report_zones ADD COLUMN id smallint GENERATED ALWAYS AS IDENTITY UNIQUE;

-- Per block × channel type × priority × agent × team: what reports filtered by channel type or priority read.
CREATE TABLE csat_detail_blocks (
    zone_id       smallint NOT NULL REFERENCES report_zones (id) ON DELETE CASCADE,
    level         smallint NOT NULL CHECK (level BETWEEN 0 AND 9),
    first_day     date NOT NULL,
    channel_type  text NOT NULL,
    priority      text NOT NULL,
    agent_id      bigint NOT NULL,
    team_id       bigint NOT NULL,
    requests      integer NOT NULL DEFAULT 0,
    responses     integer NOT NULL DEFAULT 0,
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    -- The counts ride in the key's index, so reports are index-only scans and writes keep a single index.
    PRIMARY KEY (zone_id, level, first_day, channel_type, priority, agent_id, team_id)
        INCLUDE (requests, responses, s1, s2, s3, s4, s5)
);

-- The same with channel type and priority folded in: what every other report reads (12 times fewer rows).
CREATE TABLE csat_blocks (
    zone_id    smallint NOT NULL REFERENCES report_zones (id) ON DELETE CASCADE,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 9),
    first_day  date NOT NULL,
    agent_id   bigint NOT NULL,
    team_id    bigint NOT NULL,
    requests   integer NOT NULL DEFAULT 0,
    responses  integer NOT NULL DEFAULT 0,
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    PRIMARY KEY (zone_id, level, first_day, agent_id, team_id) INCLUDE (requests, responses, s1, s2, s3, s4, s5)
);

-- Carries the existing rollups over: every level summed from the daily rows.
INSERT INTO csat_detail_blocks (zone_id, level, first_day, channel_type, priority, agent_id, team_id, requests, responses,
                                s1, s2, s3, s4, s5)
SELECT z.id, level, date '1970-01-01' + (((d.day - date '1970-01-01') >> level) << level), d.channel_type, d.priority,
       d.agent_id, d.team_id, sum(d.requests), sum(d.responses), sum(d.s1), sum(d.s2), sum(d.s3), sum(d.s4), sum(d.s5)
  FROM csat_daily d JOIN report_zones z ON z.zone = d.zone CROSS JOIN generate_series(0, 9) AS level
 GROUP BY 1, 2, 3, 4, 5, 6, 7;
INSERT INTO csat_blocks (zone_id, level, first_day, agent_id, team_id, requests, responses, s1, s2, s3, s4, s5)
SELECT zone_id, level, first_day, agent_id, team_id, sum(requests), sum(responses), sum(s1), sum(s2), sum(s3), sum(s4), sum(s5)
  FROM csat_detail_blocks
 GROUP BY 1, 2, 3, 4, 5;

DROP TABLE csat_daily, csat_daily_agent, csat_monthly_agent;
