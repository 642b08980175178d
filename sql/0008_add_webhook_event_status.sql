-- Every verified Desk webhook is kept, whatever its shape: events the gateway cannot interpret yet are marked
-- `unrecognized` (not dropped) and `desk-gateway webhooks replay` applies them again after an upgrade.
ALTER TABLE webhook_events ADD COLUMN status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'applied', 'unrecognized', 'failed'));
UPDATE webhook_events SET status = CASE WHEN processed_at IS NOT NULL THEN 'applied'
                                        WHEN attempts >= 10 THEN 'failed' ELSE 'pending' END;
CREATE INDEX webhook_events_status_idx ON webhook_events (status, id) WHERE status <> 'applied';
