-- chat_send_batch answers the type of the message a reply quotes
-- (o_target_msg_type): CREATE OR REPLACE cannot add a result column, so
-- the old functions are dropped here, the plain ones made from
-- chat_send_batch's text first, and functions.sql creates the new ones.
DROP FUNCTION IF EXISTS chat_send_batch_plain_distinct(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[], jsonb[], text[]);
DROP FUNCTION IF EXISTS chat_send_batch_plain(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[], jsonb[], text[]);
DROP FUNCTION IF EXISTS chat_send_batch(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[], jsonb[], text[]);
