-- Signed webhooks whose ticket names another Sendbird application are kept as `foreign` and never applied.
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_status_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_status_check
    CHECK (status IN ('pending', 'applied', 'unrecognized', 'failed', 'foreign'));
