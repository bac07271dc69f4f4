-- An upload ticket request may carry its uploader's idempotency key: a
-- UUID the client picks once per file and sends again with every retry
-- of the request (Idempotency-Key over HTTP, clientMsgId over RPC). A
-- retry whose first answer was lost on a weak network then answers the
-- first upload instead of making a second one charged again against the
-- day's bytes and the upload rate. What the key asked for is the upload's
-- own declared columns, so this table only ties the key to its upload:
-- small, with its own index, none added to attachment. A row goes with
-- its upload, in the statement that deletes it (ON DELETE CASCADE: the
-- cleanup's expiry, a refused upload's drop); the key is then free, and
-- makes a new upload.
CREATE TABLE upload_create (
    uploader_id BIGINT NOT NULL,
    create_key  UUID   NOT NULL,
    upload_id   TEXT   NOT NULL UNIQUE REFERENCES attachment (id) ON DELETE CASCADE,
    PRIMARY KEY (uploader_id, create_key)
);
