-- `desk-gateway outbox list --failed` and `outbox revive` ask of each failed write whether a later write of its
-- ticket exists. Pending writes are indexed by ticket (outbox_ticket_idx); ended ones were not, so each question read
-- every later write in the table: 66 ms a failed write ten days old in an outbox of two million, a listing of 1,000
-- such over a minute. Ended writes only, so a queued write's insert costs what it did.
CREATE INDEX outbox_ended_ticket_idx ON outbox (ticket_id, id) WHERE status <> 'pending';
