-- A group's system entries (membership and settings changes) are a few
-- among its messages. A leave repeated by someone no longer a member looks
-- for their member.left or member.removed entry (store.leftGroup) while
-- it holds the group's lock: this index makes that read cover the system
-- entries only, not the group's whole history. Building it reads the
-- message table once; it grows only with system entries.
CREATE INDEX message_system_idx ON message (conversation_id, seq) WHERE kind = 'system';
