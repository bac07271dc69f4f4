-- Each reaction row keeps the seq of the entry at which its emoji last
-- appeared on the message (the set that took the emoji's count from 0 to
-- 1): history lists a message's reactions in that order, the order live
-- reaction.updated events show them (a client adds an emoji when it
-- appears and drops it when its count falls to 0). Ordered by the earliest
-- row still stored, an emoji whose first setter took theirs off while
-- others still carried it moved behind the emoji that came after it.
-- chat_send_batch (functions.sql) writes it; the rows stored before are
-- given it from the reaction entries (a set answered count 1), one pass
-- over the message table's reaction entries.
ALTER TABLE reaction ADD COLUMN appeared_seq bigint;

UPDATE reaction r SET appeared_seq = a.appeared
FROM (SELECT e.conversation_id, e.target_seq, e.emoji, max(e.seq) AS appeared
      FROM message e
      WHERE e.kind = 'reaction' AND e.reaction_on AND e.reaction_count = 1 AND e.target_seq IS NOT NULL
      GROUP BY e.conversation_id, e.target_seq, e.emoji) a
WHERE a.conversation_id = r.conversation_id AND a.target_seq = r.seq AND a.emoji = r.emoji;
