-- A write refused while its own request waited: the customer was answered with the refusal (and may have sent the
-- write again), so `desk-gateway outbox revive` never puts it back; only writes answered 202 are revived. Additive:
-- the release before never reads it, and leaves it false on the refusals it books (docs/upgrading.md).
ALTER TABLE outbox ADD COLUMN refused_in_request boolean NOT NULL DEFAULT false;
