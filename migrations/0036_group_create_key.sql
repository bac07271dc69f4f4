-- A group create may carry its creator's idempotency key: a UUID the
-- client picks once per group and sends again with every retry
-- (Idempotency-Key over HTTP, clientMsgId over RPC). A retry whose first
-- answer was lost on a weak network then answers with the group the first
-- made instead of making a second one. One row per keyed create, kept as
-- long as the group, with what it asked for (the title and the other
-- members, ascending), so that the key reused for another group is told
-- apart (409 conflict).
CREATE TABLE group_create (
    creator_id      BIGINT   NOT NULL,
    create_key      UUID     NOT NULL,
    conversation_id BIGINT   NOT NULL REFERENCES conversation (id),
    title           TEXT     NOT NULL,
    members         BIGINT[] NOT NULL,
    PRIMARY KEY (creator_id, create_key)
);
