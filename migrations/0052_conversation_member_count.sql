-- conversation.member_count: how many members the conversation has, kept
-- by statement triggers on conversation_member. A connect (the session's
-- cursors: delivery treats a large group apart), the presence and profile
-- audiences (groups above a size are left out) and the member cap read a
-- group's size; counting its member rows read, for a user in many groups
-- at the cap, a thousand rows per group at every connect. Every insert
-- and delete of members runs under the conversation's row lock (a member
-- change, a group's or a direct pair's creation), which the trigger's
-- update takes too.
ALTER TABLE conversation ADD COLUMN member_count integer NOT NULL DEFAULT 0;

UPDATE conversation c SET member_count = m.n
FROM (SELECT conversation_id, count(*) AS n FROM conversation_member GROUP BY 1) m
WHERE c.id = m.conversation_id;

CREATE FUNCTION chat_member_count_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversation c SET member_count = c.member_count + n.n
    FROM (SELECT conversation_id, count(*) AS n FROM added GROUP BY 1) n
    WHERE c.id = n.conversation_id;
    RETURN NULL;
END;
$$;

CREATE FUNCTION chat_member_count_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversation c SET member_count = c.member_count - n.n
    FROM (SELECT conversation_id, count(*) AS n FROM removed GROUP BY 1) n
    WHERE c.id = n.conversation_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER conversation_member_count_added
    AFTER INSERT ON conversation_member REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION chat_member_count_added();

CREATE TRIGGER conversation_member_count_removed
    AFTER DELETE ON conversation_member REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION chat_member_count_removed();
