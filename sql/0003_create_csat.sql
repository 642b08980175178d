-- Customer satisfaction: every rating with the agent and team that held the ticket when it was rated (copied,
-- never re-derived), and every CSAT request sent, so reports can compute response rates.

CREATE TABLE csat_ratings (
    id                    bigserial PRIMARY KEY,
    ticket_id             bigint NOT NULL,
    -- The CSAT request message answered; 0 when only the ticket's rating is known (Platform API sync).
    message_id            bigint NOT NULL DEFAULT 0,
    score                 smallint CHECK (score BETWEEN 1 AND 5),
    comment               text,
    agent_id              bigint,
    team_id               bigint,
    channel_type          text NOT NULL DEFAULT 'UNKNOWN',
    priority              text NOT NULL DEFAULT 'MEDIUM',
    customer_sendbird_id  text,
    rated_at              timestamptz NOT NULL,
    recorded_at           timestamptz NOT NULL DEFAULT now(),
    source                text NOT NULL CHECK (source IN ('gateway', 'webhook', 'sync')),
    UNIQUE (ticket_id, message_id)
);
CREATE INDEX csat_ratings_rated_at_idx ON csat_ratings (rated_at, id);
CREATE INDEX csat_ratings_ticket_idx ON csat_ratings (ticket_id);

CREATE TABLE csat_requests (
    id            bigserial UNIQUE,
    ticket_id     bigint NOT NULL,
    message_id    bigint NOT NULL,
    agent_id      bigint,
    team_id       bigint,
    channel_type  text NOT NULL DEFAULT 'UNKNOWN',
    priority      text NOT NULL DEFAULT 'MEDIUM',
    requested_at  timestamptz NOT NULL,
    PRIMARY KEY (ticket_id, message_id)
);
CREATE INDEX csat_requests_requested_at_idx ON csat_requests (requested_at);
