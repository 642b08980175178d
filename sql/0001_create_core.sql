-- Core tables every later capability builds on. Forward-only: never edit an applied migration, add a new one.

-- Desk session for a customer, keyed by the hash of the opaque bearer token the gateway handed out.
CREATE TABLE customers (
    id              bigserial PRIMARY KEY,
    sendbird_id     text NOT NULL UNIQUE,
    display_name    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
