-- chat_session.conn_token names the connection that opened the session
-- last (the node's id, a per-process id and a per-connection counter; set
-- by chat_session_open). A connection that ends deletes its session
-- (clean) or starts its expiry clock (persistent) only while its token is
-- still the session's: a client that reconnected meanwhile, on another
-- node (which does not close the old connection) or on this one (where
-- mochi's takeover races the old connection's end), holds the session
-- now, and the old connection's end must neither delete it nor set its
-- expiry. NULL for sessions opened before this column: no chatd that
-- reads it ends them.
--
-- The functions that open and touch sessions take the token now; their
-- old signatures are dropped here and functions.sql creates the new ones.
ALTER TABLE chat_session ADD COLUMN conn_token text;
DROP FUNCTION IF EXISTS chat_session_open(text, bigint, boolean, boolean, bigint);
DROP FUNCTION IF EXISTS chat_sessions_touch(text[], bigint[]);
