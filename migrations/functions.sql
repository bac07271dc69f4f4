-- chatd's SQL functions, one file, re-applied (CREATE OR REPLACE) by every
-- migration run after the numbered migrations, so the database always runs
-- the functions of the binary that migrated it last. A change of a
-- function's arguments or result needs a numbered migration that drops the
-- old one first; everything else is edited here.
--
-- # chat_send_batch(p_conv, p_sender, p_id, p_body)
--
-- The only way a message is written. Group commit calls it once per
-- transaction with the batch's sends as parallel arrays, one element per
-- send, in arrival order; a lone send is a batch of one.
--
-- Returns one row per send, in the same order:
--   o_status 0 new (o_seq, o_at), 1 duplicate (o_seq, o_sender, o_body,
--            o_at of the stored message), 2 clientMsgId used by another
--            sender, 3 sender not a member, 4 no such conversation;
--   o_body   NULL for a new message (the caller has it).
--
-- Rules, each decided once here:
--   - seq is the conversation's last_seq + 1, under the conversation row's
--     lock: per conversation, seqs are 1, 2, 3, ... with no gaps, and
--     within a conversation they follow the arrays' order;
--   - only members send;
--   - (conversation, clientMsgId) is one message: a resend by its sender
--     answers the stored message, another sender's is a conflict; a later
--     send of the batch with an earlier one's clientMsgId repeats it;
--   - a send that fails uses no seq;
--   - created_at is taken under the lock and never before the
--     conversation's previous message, so times follow seq order and the
--     inbox's sort key never moves backwards;
--   - the conversation's last_seq and last_message_at move with the batch;
--   - the sender has read what it wrote: its read watermark moves to its
--     newest message;
--   - every new message writes one outbox row referencing it
--     (type message.new, conversation_id, seq; the relay encodes it), in
--     seq order.
--
-- Locks are taken in a fixed order, the order every other writer uses:
-- conversation rows by id before anything else, member rows by
-- (conversation, user), so concurrent batches and receipt flushes never
-- deadlock. The deciding statement runs after the conversation locks are
-- granted and so (READ COMMITTED, a volatile function: a fresh snapshot per
-- statement) sees what the previous holder committed, such as the same
-- clientMsgId sent through another node.
--
-- Every statement looks rows up by key for each element of a small array
-- (LATERAL ... LIMIT 1 keeps even a plan made on a fresh, unanalyzed
-- database on the indexes), so cached generic plans are safe, and they save
-- planning each statement of each call.
CREATE OR REPLACE FUNCTION chat_send_batch(p_conv bigint[], p_sender bigint[], p_id uuid[], p_body text[])
RETURNS TABLE (o_status smallint, o_seq bigint, o_sender bigint, o_body text, o_at timestamptz)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_at     timestamptz;
    v_new    int;
    v_status smallint[];
    v_seq    bigint[];
    v_sender bigint[];
    v_body   text[];
    v_when   timestamptz[];
BEGIN
    IF cardinality(p_conv) IS DISTINCT FROM cardinality(p_sender)
       OR cardinality(p_conv) IS DISTINCT FROM cardinality(p_id)
       OR cardinality(p_conv) IS DISTINCT FROM cardinality(p_body) THEN
        RAISE EXCEPTION 'chat_send_batch: argument arrays differ in length';
    END IF;

    PERFORM 1
    FROM (SELECT DISTINCT u.c FROM unnest(p_conv) AS u(c) ORDER BY u.c) k
    CROSS JOIN LATERAL (SELECT 1 FROM conversation cv WHERE cv.id = k.c LIMIT 1 FOR UPDATE) l;

    WITH req AS (
        SELECT t.ord, t.c, t.s, t.id, t.b
        FROM unnest(p_conv, p_sender, p_id, p_body) WITH ORDINALITY AS t(c, s, id, b, ord)
    ), cls AS (
        -- What each send is judged against.
        SELECT r.ord, r.c, r.s, r.id, r.b, cv.last_seq, cv.last_message_at,
               mb.ok IS NOT NULL AS member,
               st.seq AS st_seq, st.sender_id AS st_sender, st.body AS st_body, st.created_at AS st_at,
               cv.last_seq IS NOT NULL AND mb.ok IS NOT NULL AND st.seq IS NULL AS eligible
        FROM req r
        LEFT JOIN LATERAL (SELECT c.last_seq, c.last_message_at FROM conversation c
                           WHERE c.id = r.c LIMIT 1) cv ON true
        LEFT JOIN LATERAL (SELECT true AS ok FROM conversation_member m
                           WHERE m.conversation_id = r.c AND m.user_id = r.s LIMIT 1) mb ON true
        LEFT JOIN LATERAL (SELECT m.seq, m.sender_id, m.body, m.created_at FROM message m
                           WHERE m.conversation_id = r.c AND m.client_msg_id = r.id LIMIT 1) st ON true
    ), firsts AS (
        -- The first eligible send of each clientMsgId is new; later ones
        -- repeat it.
        SELECT x.*,
               count(*) FILTER (WHERE x.eligible) OVER byid AS nth,
               (array_agg(x.s) FILTER (WHERE x.eligible) OVER byid)[1] AS first_s,
               (array_agg(x.b) FILTER (WHERE x.eligible) OVER byid)[1] AS first_b
        FROM cls x
        WINDOW byid AS (PARTITION BY x.c, x.id ORDER BY x.ord)
    ), numbered AS (
        SELECT f.*, f.eligible AND f.nth = 1 AS is_new,
               f.last_seq + count(*) FILTER (WHERE f.eligible AND f.nth = 1)
                   OVER (PARTITION BY f.c ORDER BY f.ord) AS run_seq
        FROM firsts f
    ), seqs AS (
        SELECT n.*, max(n.run_seq) FILTER (WHERE n.is_new) OVER (PARTITION BY n.c, n.id) AS new_seq
        FROM numbered n
    ), clock AS (
        SELECT GREATEST(clock_timestamp(), max(x.last_message_at)) AS at FROM cls x
    )
    SELECT k.at,
           count(*) FILTER (WHERE q.is_new),
           array_agg((CASE
               WHEN q.last_seq IS NULL THEN 4
               WHEN NOT q.member THEN 3
               WHEN q.st_seq IS NOT NULL THEN CASE WHEN q.st_sender = q.s THEN 1 ELSE 2 END
               WHEN q.is_new THEN 0
               WHEN q.first_s = q.s THEN 1
               ELSE 2 END)::smallint ORDER BY q.ord),
           array_agg(COALESCE(q.st_seq, q.new_seq) ORDER BY q.ord),
           array_agg(COALESCE(q.st_sender, q.first_s) ORDER BY q.ord),
           array_agg(CASE WHEN q.is_new THEN NULL ELSE COALESCE(q.st_body, q.first_b) END ORDER BY q.ord),
           array_agg(COALESCE(q.st_at, k.at) ORDER BY q.ord)
    INTO v_at, v_new, v_status, v_seq, v_sender, v_body, v_when
    FROM seqs q CROSS JOIN clock k
    GROUP BY k.at;

    IF v_new > 0 THEN
        -- One statement writes all four tables: each statement of a
        -- function costs its own executor start-up, which is most of what
        -- a small batch costs PostgreSQL. The sub-statements share one
        -- snapshot; none reads what another writes. Member rows are
        -- locked in (conversation, user) order before they are updated
        -- (lk feeds the update whatever join the planner picks).
        WITH ins AS (
            INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at)
            SELECT t.c, t.q, t.s, t.id, t.b, v_at
            FROM unnest(p_conv, v_seq, p_sender, p_id, p_body, v_status) AS t(c, q, s, id, b, st)
            WHERE t.st = 0
        ), conv AS (
            UPDATE conversation c SET last_seq = u.last, last_message_at = v_at
            FROM (SELECT t.c, max(t.q) AS last FROM unnest(p_conv, v_seq, v_status) AS t(c, q, st)
                  WHERE t.st = 0 GROUP BY t.c) u
            WHERE c.id = u.c
        ), lk AS MATERIALIZED (
            SELECT w.c, w.s, w.q
            FROM (SELECT t.c, t.s, max(t.q) AS q FROM unnest(p_conv, p_sender, v_seq, v_status) AS t(c, s, q, st)
                  WHERE t.st = 0 GROUP BY t.c, t.s ORDER BY t.c, t.s) w
            CROSS JOIN LATERAL (SELECT 1 FROM conversation_member m
                                WHERE m.conversation_id = w.c AND m.user_id = w.s LIMIT 1 FOR UPDATE) l
        ), reader AS (
            UPDATE conversation_member m SET last_read_seq = GREATEST(m.last_read_seq, lk.q)
            FROM lk
            WHERE m.conversation_id = lk.c AND m.user_id = lk.s
        )
        INSERT INTO outbox (msg_key, type, conversation_id, seq)
        SELECT t.c::text, 'message.new', t.c, t.q
        FROM unnest(p_conv, v_seq, v_status) WITH ORDINALITY AS t(c, q, st, ord)
        WHERE t.st = 0
        ORDER BY t.ord;
    END IF;

    RETURN QUERY SELECT * FROM unnest(v_status, v_seq, v_sender, v_body, v_when);
END;
$$;

-- # chat_outbox_notify (trigger on outbox, statement level)
--
-- Wakes the outbox relay (LISTEN chat_outbox) when events commit. Hot write
-- paths set chat.defer_notify for their transaction and send the wake-up
-- after COMMIT, in a transaction of its own and only when a relay on another
-- node needs it: a NOTIFY inside a writing transaction holds PostgreSQL's
-- global notify lock from pre-commit through the WAL flush, so every
-- notifying commit would wait for the previous one's fsync.
CREATE OR REPLACE FUNCTION chat_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('chat.defer_notify', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('chat_outbox', '');
    RETURN NULL;
END;
$$;

-- # chat_member_delivery_forget (trigger on conversation_member, row level)
--
-- A member who leaves takes their member_delivery row along (that table has
-- no foreign key: its KEY SHARE check would conflict with group commit's
-- FOR UPDATE of the member row).
CREATE OR REPLACE FUNCTION chat_member_delivery_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM member_delivery WHERE conversation_id = OLD.conversation_id AND user_id = OLD.user_id;
    RETURN NULL;
END;
$$;
