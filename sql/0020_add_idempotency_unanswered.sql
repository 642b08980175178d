-- Since when attempts of an idempotent request went unanswered and may have taken effect (a ticket creation Desk
-- took but never answered): the retry looks for what they made before making it again. Additive: the release
-- before never reads it.
ALTER TABLE idempotency_keys ADD COLUMN unanswered_since timestamptz;
