-- Nothing acknowledged is lost: customer writes to Desk go through a transactional outbox, and Desk webhooks are
-- kept in a durable inbox (deduplicated) before they are applied.

CREATE TABLE outbox (
    id               bigserial PRIMARY KEY,
    ticket_id        bigint NOT NULL,
    customer_id      bigint NOT NULL REFERENCES customers (id),
    session_id       bigint NOT NULL REFERENCES sessions (id),
    kind             text NOT NULL CHECK (kind IN ('feedback', 'closure_confirmation', 'close', 'reopen', 'custom_fields', 'related_channels')),
    payload          jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    -- A delivery in progress: other instances leave the row alone until the claim runs out.
    claimed_until    timestamptz,
    claimed_by       text,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX outbox_ticket_idx ON outbox (ticket_id, id) WHERE status = 'pending';

ALTER TABLE tickets ADD COLUMN pending_operations jsonb NOT NULL DEFAULT '[]';

CREATE TABLE webhook_events (
    id            bigserial PRIMARY KEY,
    -- The event's id when Desk sends one, otherwise the SHA-256 of the body: redeliveries collapse into one row.
    dedupe_key    text NOT NULL UNIQUE,
    event_type    text NOT NULL,
    body          jsonb NOT NULL,
    received_at   timestamptz NOT NULL DEFAULT now(),
    processed_at  timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
CREATE INDEX webhook_events_pending_idx ON webhook_events (id) WHERE processed_at IS NULL;
