-- CSAT reporting: API keys for reporting clients, the configured reporting time zones, and daily rollups kept in
-- the same transaction as each rating or request, so reports in a configured zone never scan raw ratings.

CREATE TABLE api_keys (
    id            bigserial PRIMARY KEY,
    name          text NOT NULL,
    key_hash      bytea NOT NULL UNIQUE,
    scopes        text[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- Zones whose rollups are maintained. New ratings update every zone listed here; reports read a zone's rollups
-- only once its backfill from older ratings has finished (backfilled_at set).
CREATE TABLE report_zones (
    zone               text PRIMARY KEY,
    added_at           timestamptz NOT NULL DEFAULT now(),
    last_rating_id     bigint NOT NULL DEFAULT 0,
    last_request_id    bigint NOT NULL DEFAULT 0,
    backfilled_at      timestamptz
);

-- Per local day × agent × team × channel type × priority. agent_id/team_id 0 = none.
CREATE TABLE csat_daily (
    zone          text NOT NULL,
    day           date NOT NULL,
    agent_id      bigint NOT NULL,
    team_id       bigint NOT NULL,
    channel_type  text NOT NULL,
    priority      text NOT NULL,
    requests      integer NOT NULL DEFAULT 0,
    responses     integer NOT NULL DEFAULT 0,
    scored        integer NOT NULL DEFAULT 0,
    score_sum     integer NOT NULL DEFAULT 0,
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    PRIMARY KEY (zone, day, agent_id, team_id, channel_type, priority)
);

-- The same figures with channel type and priority folded in: what unfiltered reports read (far fewer rows).
CREATE TABLE csat_daily_agent (
    zone       text NOT NULL,
    day        date NOT NULL,
    agent_id   bigint NOT NULL,
    team_id    bigint NOT NULL,
    requests   integer NOT NULL DEFAULT 0,
    responses  integer NOT NULL DEFAULT 0,
    scored     integer NOT NULL DEFAULT 0,
    score_sum  integer NOT NULL DEFAULT 0,
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    PRIMARY KEY (zone, day, agent_id, team_id)
);
-- The agent × team figures per local month: long unfiltered reports read whole months here and only the partial
-- months at either end from the daily table.
CREATE TABLE csat_monthly_agent (
    zone       text NOT NULL,
    month      date NOT NULL,
    agent_id   bigint NOT NULL,
    team_id    bigint NOT NULL,
    requests   integer NOT NULL DEFAULT 0,
    responses  integer NOT NULL DEFAULT 0,
    scored     integer NOT NULL DEFAULT 0,
    score_sum  integer NOT NULL DEFAULT 0,
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    PRIMARY KEY (zone, month, agent_id, team_id)
);

-- Lets unfiltered reports run as index-only scans.
CREATE INDEX csat_daily_agent_cover_idx ON csat_daily_agent (zone, day)
    INCLUDE (agent_id, team_id, requests, responses, scored, score_sum, s1, s2, s3, s4, s5);
CREATE INDEX csat_monthly_agent_cover_idx ON csat_monthly_agent (zone, month)
    INCLUDE (agent_id, team_id, requests, responses, scored, score_sum, s1, s2, s3, s4, s5);

-- Watermarks of incremental jobs (the Platform API sync).
CREATE TABLE sync_state (
    name        text PRIMARY KEY,
    value       text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
