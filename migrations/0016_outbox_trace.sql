-- The trace context of the write that made an outbox row (W3C
-- traceparent and tracestate, NULL when it was not traced), so the relay
-- can put it into the Kafka record's headers and a downstream consumer
-- continues the trace of the send that committed the event. The row is the
-- only route from the sending node to the relaying one that survives a
-- restart; the columns cost nothing when tracing is off (NULL).
ALTER TABLE outbox ADD COLUMN traceparent text, ADD COLUMN tracestate text;

-- chat_send_batch takes the trace contexts of its changes (functions.sql);
-- the new arguments default to NULL, so a node still on the previous
-- version keeps committing through the new function until it is replaced.
-- On a new database functions.sql has not run yet: nothing to drop.
DROP FUNCTION IF EXISTS chat_send_batch(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval);
