-- Token revocation ("sign out everywhere", chatctl revoke-tokens): every
-- token of user_id issued (iat) before revoked_before is refused, at MQTT
-- CONNECT, by every HTTP request and RPC, and connections authenticated by
-- one are closed (store/tokens.go). revoked_at is when it was last set:
-- a node whose listener missed announcements reads those set since.
CREATE TABLE token_revocation (
    user_id        bigint      PRIMARY KEY,
    revoked_before timestamptz NOT NULL,
    revoked_at     timestamptz NOT NULL
);

CREATE INDEX token_revocation_revoked_at_idx ON token_revocation (revoked_at);
