-- Tables whose rows are updated or deleted all day get vacuumed sooner than PostgreSQL's default (a fifth of the
-- table dead), so the space of dead rows is reused before the table grows: with housekeeping deleting what is past
-- its retention, their size then levels off. Cached tickets are rewritten several times each (created, assigned,
-- closed, rated, refreshed): free room on each page lets most of those updates stay on the page (HOT).
ALTER TABLE tickets SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
ALTER TABLE webhook_events SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
ALTER TABLE idempotency_keys SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
ALTER TABLE sessions SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
ALTER TABLE customer_syncs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
ALTER TABLE report_sessions SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);
