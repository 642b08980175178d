-- The customer API: sessions, the ticket cache, idempotency records, and the agent/team directory.

-- Secrets the gateway generates for itself when the operator provides none (development only; see README).
CREATE TABLE gateway_settings (
    key         text PRIMARY KEY,
    value       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE customers ADD COLUMN desk_customer_id bigint;

-- Bearer sessions. Only the SHA-256 of the token is stored; the Desk session token is sealed (AES-GCM).
CREATE TABLE sessions (
    id                 bigserial PRIMARY KEY,
    token_hash         bytea NOT NULL UNIQUE,
    customer_id        bigint NOT NULL REFERENCES customers (id),
    desk_token_sealed  bytea NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    expires_at         timestamptz NOT NULL,
    revoked_at         timestamptz
);
CREATE INDEX sessions_customer_idx ON sessions (customer_id);
CREATE INDEX sessions_expired_idx ON sessions (expires_at);

CREATE TABLE teams (
    id          bigint PRIMARY KEY,
    key         text,
    name        text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id            bigint PRIMARY KEY,
    display_name  text NOT NULL,
    sendbird_id   text,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per Desk ticket: indexed columns for lists and filters, the gateway's JSON document (served as is),
-- Desk's raw JSON, and when it was fetched (freshness).
CREATE TABLE tickets (
    id             bigint PRIMARY KEY,
    customer_id    bigint NOT NULL REFERENCES customers (id),
    channel_url    text NOT NULL UNIQUE,
    status         text NOT NULL,
    priority       text NOT NULL,
    title          text NOT NULL,
    team_id        bigint,
    agent_id       bigint,
    custom_fields  jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    closed_at      timestamptz,
    document       text NOT NULL,
    desk           jsonb NOT NULL,
    fetched_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tickets_customer_list_idx ON tickets (customer_id, (status = 'CLOSED'), created_at DESC, id DESC);
CREATE INDEX tickets_custom_fields_idx ON tickets USING gin (custom_fields jsonb_path_ops);

-- When a customer's ticket list was last read from Desk in full (lists are answered from the cache while fresh).
CREATE TABLE customer_syncs (
    customer_id  bigint PRIMARY KEY REFERENCES customers (id),
    synced_at    timestamptz NOT NULL
);

-- Idempotency-Key records: the first answer is replayed for the same key and body for 24 hours.
CREATE TABLE idempotency_keys (
    principal     text NOT NULL,
    key           text NOT NULL,
    request_hash  bytea NOT NULL,
    status        integer,
    headers       jsonb,
    body          bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
