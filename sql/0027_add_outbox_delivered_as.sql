-- Whose Desk identity carried a delivered write: `customer` (the customer's Desk session) or `application` (the
-- Platform API with the gateway's token, for a close, priority or cancel whose customer did not sign in again within
-- the sign-in wait). `GET /v1/operations/{id}` shows it as `deliveredAs`. Null while pending, when failed, and for
-- writes delivered before this migration or by an instance of the release before (docs/upgrading.md).
ALTER TABLE outbox ADD COLUMN delivered_as text CHECK (delivered_as IN ('customer', 'application'));
