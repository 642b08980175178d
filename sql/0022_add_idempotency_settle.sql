-- Until when Desk may still carry out an unanswered attempt of an idempotent request (its answer never came: Desk
-- may finish it after the gateway stopped waiting). A retry that finds nothing before then waits instead of making
-- it again. Additive: the release before never reads it.
ALTER TABLE idempotency_keys ADD COLUMN settles_at timestamptz;
