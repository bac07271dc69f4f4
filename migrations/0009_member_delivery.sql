-- Delivered watermarks that PUBACKs move get a table of their own.
--
-- A send moves its sender's read watermark, so group commit locks the
-- sender's conversation_member row; a delivered-watermark flush moved
-- last_delivered_seq in those same rows, about a hundred at a time at the
-- direct maximum. Each waited for the other's commit (sampled at the direct
-- ceiling: send calls waiting for a member row lock 112 times against 341
-- on the CPU, delivered flushes 69 times). In member_delivery the two never
-- meet.
--
-- The delivered watermark is now the greater of conversation_member's
-- last_delivered_seq (set when a member joins and by read receipts: what
-- was read was delivered) and member_delivery's delivered_seq (set by
-- delivered acknowledgements). The view member_watermark is the one place
-- that says so: it is conversation_member with that greater value in
-- last_delivered_seq, and every reader reads members through it. Rows
-- appear with a member's first delivered flush and go with the member: no
-- foreign key, whose check would take a KEY SHARE lock on the member row
-- that conflicts with group commit's FOR UPDATE. A flush that races a
-- member's removal can leave a row behind; it is harmless (a member who
-- rejoins starts at the then last_seq, above it) and goes with the next
-- removal of that member.

CREATE TABLE member_delivery (
    conversation_id bigint NOT NULL,
    user_id         bigint NOT NULL,
    delivered_seq   bigint NOT NULL CHECK (delivered_seq >= 0),
    PRIMARY KEY (conversation_id, user_id)
);

CREATE FUNCTION chat_member_delivery_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM member_delivery WHERE conversation_id = OLD.conversation_id AND user_id = OLD.user_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER member_delivery_forget
    AFTER DELETE ON conversation_member
    FOR EACH ROW EXECUTE FUNCTION chat_member_delivery_forget();

CREATE VIEW member_watermark AS
SELECT m.conversation_id, m.user_id, m.role, m.last_read_seq,
       GREATEST(m.last_delivered_seq, COALESCE(d.delivered_seq, 0)) AS last_delivered_seq,
       m.join_seq, m.joined_at
FROM conversation_member m
LEFT JOIN member_delivery d ON d.conversation_id = m.conversation_id AND d.user_id = m.user_id;
