-- member_watermark looks each member's delivered watermark up by key
-- (LATERAL ... LIMIT 1) rather than joining member_delivery: readers of
-- a group's members (the other members' lowest watermarks, per inbox row
-- and history page) are planned from the average conversation, two or
-- three members, and for a group of a thousand the join compared every
-- member with every delivered watermark of the group (a million
-- comparisons, half a second an inbox page of such groups). By key it is
-- one index lookup a member whatever the plan.
CREATE OR REPLACE VIEW member_watermark AS
SELECT m.conversation_id, m.user_id, m.role, m.last_read_seq,
       GREATEST(m.last_delivered_seq, COALESCE(d.delivered_seq, 0)) AS last_delivered_seq,
       m.join_seq, m.joined_at
FROM conversation_member m
LEFT JOIN LATERAL (SELECT x.delivered_seq FROM member_delivery x
                   WHERE x.conversation_id = m.conversation_id AND x.user_id = m.user_id LIMIT 1) d ON true;
