-- session_cursor.end_seq marks the cursor of a conversation its user left
-- (or was removed from): the last seq the session is owed there, the
-- conversation's last_seq when the leave committed. The leave writes it
-- for each of the user's persistent sessions, connected or not, so one
-- that was offline gets on reconnect what was committed up to the leave,
-- as a connected one got it live. NULL while the user is a member; a
-- member again (added back) reads the cursor as a member's and ignores it.
ALTER TABLE session_cursor ADD COLUMN end_seq bigint;
