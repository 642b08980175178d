-- The embedded Desk emulator's state (make run without DESK_BASE_URL), in a schema of its own: it lives and dies
-- with the cache it must agree with, so a second run hands out new ticket ids instead of reusing 1001.
-- One row per team, agent, customer, ticket, Desk session, plus one `meta` row (counters, settings, instance id).
-- The gateway's own tables never read it; `desk-gateway cache reset` leaves it alone.
CREATE SCHEMA desk_emulator;
CREATE TABLE desk_emulator.records (
    kind   text NOT NULL,
    key    text NOT NULL,
    value  text NOT NULL,
    PRIMARY KEY (kind, key)
);
