-- A former member's catch-up reads their history floor at the leave from
-- their own member.added entry, the last one naming them up to the leave
-- (store.endedFloorSQL). This index holds the member.added entries by the
-- user they add, so that read is one entry, where message_system_idx made
-- it walk every system entry of the group between their join and their
-- leave, a thousand in a group that a thousand members joined meanwhile.
-- The stored JSON of a system entry (chat.EncodeSystemEntry) holds
-- "action":"member.added" only as its action: inside a title or about a
-- quote is escaped, so the LIKE cannot match there. Every entry it
-- matches is that JSON, with the user's id as userId. Building it reads
-- the message table once; it grows by one entry a join.
CREATE INDEX message_member_added_idx ON message (conversation_id, ((body::jsonb ->> 'userId')::bigint), seq)
    WHERE kind = 'system' AND body LIKE '%"action":"member.added"%';
