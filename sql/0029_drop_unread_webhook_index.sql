-- No statement has read webhook_events_pending_idx since the inbox chose its events by status (migration 0008, with
-- webhook_events_status_idx). Every received event still added an entry to it, and events never applied
-- (unrecognized, foreign, failed) stayed in it until housekeeping removed them.
DROP INDEX IF EXISTS webhook_events_pending_idx;
