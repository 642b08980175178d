-- Since when a queued write has waited for its customer to sign in again: Desk refused the customer's Desk session
-- (and every later one) when the relay delivered it. The write fails once the wait is over. Additive: the release
-- before never reads it.
ALTER TABLE outbox ADD COLUMN awaiting_sign_in_since timestamptz;
