-- session_cursor.owed_joins and owed_ends (pairwise: join, end) are the
-- memberships of the conversation that followed the one ending at end_seq
-- and ended too, oldest first, while the session still owed entries of
-- an earlier one (delivered_seq below end_seq or below one of owed_ends):
-- a user removed, added back and removed again while the session was
-- behind is owed the unacknowledged entries of every one of those
-- memberships, not only of the last. A leave appends its membership here
-- when something earlier is still owed, and otherwise resets both to
-- empty (end_seq then holds it). Spans the cursor has passed are ignored
-- by whoever reads them (store.Sessions.Cursors).
ALTER TABLE session_cursor
    ADD COLUMN owed_joins bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN owed_ends bigint[] NOT NULL DEFAULT '{}';
