-- Two more queued customer writes: a ticket's priority (PUT /v1/tickets/{id}/priority) and giving a ticket back to
-- the queue (POST /v1/tickets/{id}/cancel, the SDK's ticket.cancel). The check is added NOT VALID and validated after
-- (a SHARE UPDATE EXCLUSIVE lock, so writers are not held while the rows are read). The release before cannot read
-- the new kinds: docs/upgrading.md says what it does with one while both run.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('feedback', 'closure_confirmation', 'close', 'reopen', 'custom_fields', 'related_channels', 'priority', 'cancel'))
    NOT VALID;
ALTER TABLE outbox VALIDATE CONSTRAINT outbox_kind_check;
