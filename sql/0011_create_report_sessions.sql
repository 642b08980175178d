-- Browser sessions of the report page (/reports): opened with a reports API key, ended by sign-out, expiry or the
-- key's revocation. Only the SHA-256 of the cookie's token is stored.
CREATE TABLE report_sessions (
    id          bigserial PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE,
    api_key_id  bigint NOT NULL REFERENCES api_keys (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX report_sessions_expires_idx ON report_sessions (expires_at);
CREATE INDEX report_sessions_key_idx ON report_sessions (api_key_id);
