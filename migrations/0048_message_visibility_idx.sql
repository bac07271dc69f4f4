-- A former member's catch-up reads the group's history visibility at
-- their leave from the group.updated entries that changed it
-- (store.visibleAtSQL). This index holds those entries only, a few per
-- group at most, where message_system_idx made that read walk every
-- membership and settings entry of the group, a thousand in a group
-- that a thousand members joined. The stored JSON of a system entry
-- (chat.EncodeSystemEntry) names historyVisible only in an entry that
-- changed it; a title or about cannot hold the key's quoted name
-- unescaped. Building it reads the message table once; it grows only
-- with such changes.
CREATE INDEX message_visibility_idx ON message (conversation_id, seq)
    WHERE kind = 'system' AND body LIKE '%"historyVisible"%';
