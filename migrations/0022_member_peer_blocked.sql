-- A direct conversation's member row says whether the other member blocked
-- them: the send function reads it with the member row it reads anyway,
-- instead of looking the other member and user_block up for every change
-- (blocks are rare, sends are not). Kept with user_block in the same
-- transaction by Store.Block, Store.Unblock and the creation of a direct
-- conversation, which serialise on the pair (store/people.go).
ALTER TABLE conversation_member ADD COLUMN peer_blocked boolean NOT NULL DEFAULT false;

UPDATE conversation_member m SET peer_blocked = true
FROM user_block b
JOIN direct_pair p ON p.user_low = LEAST(b.blocker_id, b.blocked_id) AND p.user_high = GREATEST(b.blocker_id, b.blocked_id)
WHERE m.conversation_id = p.conversation_id AND m.user_id = b.blocked_id;
