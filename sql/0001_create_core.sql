-- Core tables every later capability builds on. Forward-only: never edit an applied migration, add a new one.

-- A customer as the gateway knows them: the Sendbird user id is the identity.
CREATE TABLE customers (
    id              bigserial PRIMARY KEY,
    sendbird_id     text NOT NULL UNIQUE,
    display_name    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
