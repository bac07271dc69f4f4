-- Which life of a node its heartbeat row is: a row inserted anew (the
-- node starts, or beats again after another node took it for dead and
-- deleted its row) gets a new one, its heartbeats keep it. A node that
-- reads an incarnation other than the one it last read was revived
-- (store.Presence.Heartbeat), also when the reply of the heartbeat that
-- inserted the row was lost.
ALTER TABLE chat_node ADD COLUMN incarnation uuid NOT NULL DEFAULT gen_random_uuid();
