-- chat_send_batch answers a duplicate message's recall (o_recalled_at):
-- CREATE OR REPLACE cannot add a result column, so the old function is
-- dropped here and functions.sql creates the new one.
DROP FUNCTION IF EXISTS chat_send_batch(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[], jsonb[], text[]);
