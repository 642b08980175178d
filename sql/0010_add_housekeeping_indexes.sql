-- Housekeeping deletes what is past its retention in small batches; these indexes let each batch find its rows
-- without scanning the table (and let a session's outbox rows be checked before the session goes).
CREATE INDEX outbox_session_idx ON outbox (session_id);
CREATE INDEX outbox_finished_idx ON outbox (finished_at) WHERE status <> 'pending';
CREATE INDEX sessions_revoked_idx ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX webhook_events_received_idx ON webhook_events (status, received_at);
CREATE INDEX tickets_closed_idx ON tickets ((coalesce(closed_at, updated_at))) WHERE status = 'CLOSED';
