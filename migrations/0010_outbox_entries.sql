-- Outbox rows of stream entries (message.new today) reference the entry
-- instead of carrying its JSON: chatd's Go encoder is then the only place
-- that turns a message into event JSON, for MQTT, HTTP and Kafka alike, and
-- a relayed event shows the entry as it is when it is relayed.
--
--   type            the event type, for every row;
--   conversation_id the entry's conversation and
--   seq             its seq, for rows that reference an entry (payload NULL);
--   payload         the event JSON of every other row (receipts, membership).
--
-- The relay reads rows in id order and encodes a referencing row from the
-- entry it points at (relay/). Rows written before this migration keep their
-- payload and are relayed as they are.
--
-- Upgrading: nodes older than this schema write message.new rows with a
-- payload and relay only rows with one; run one version across a cluster
-- (stop the old nodes before starting new ones).

ALTER TABLE outbox ADD COLUMN type text;
UPDATE outbox SET type = COALESCE(payload->>'type', '');
ALTER TABLE outbox ALTER COLUMN type SET NOT NULL;
ALTER TABLE outbox ADD COLUMN conversation_id bigint;
ALTER TABLE outbox ADD COLUMN seq bigint;
ALTER TABLE outbox ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE outbox ADD CONSTRAINT outbox_payload_or_entry
    CHECK (payload IS NOT NULL OR (conversation_id IS NOT NULL AND seq IS NOT NULL));

-- The functions live in migrations/functions.sql from now on, re-applied by
-- every migration run. chat_rfc3339 formatted JSON times in SQL and has no
-- caller left.
DROP FUNCTION chat_rfc3339(timestamptz);
