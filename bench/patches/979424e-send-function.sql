-- chat_send_batch as it was before the message lifecycle (979424e), for
-- plain messages only, under today's signature, so that a chatd of today
-- can run it in place of its own: bench/ab.sh applies a build directory's
-- send.sql after chatd started (docs/benchmarks.md, "Sends are not slower
-- with the new kinds"). Two changes to 979424e's text: the arguments and
-- result are today's (the lifecycle's are refused, their results NULL),
-- and the message row gets msg_no (= seq: a conversation of messages
-- alone), a column the lifecycle added as NOT NULL. Not for production:
-- it keeps neither message_count nor last_message_seq.
CREATE OR REPLACE FUNCTION chat_send_batch(
    p_kind text[], p_conv bigint[], p_sender bigint[], p_id uuid[], p_body text[], p_target bigint[],
    p_fwd_conv bigint[], p_fwd_seq bigint[], p_emoji text[], p_on boolean[],
    p_edit_window interval, p_recall_window interval,
    p_traceparent text[] DEFAULT NULL, p_tracestate text[] DEFAULT NULL,
    p_attach jsonb[] DEFAULT NULL, p_types text[] DEFAULT NULL)
RETURNS TABLE (o_status smallint, o_seq bigint, o_sender bigint, o_body text, o_at timestamptz,
               o_target_sender bigint, o_snippet text, o_target_recalled boolean, o_count integer,
               o_msg_type text, o_attachments jsonb)
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
    IF p_kind && ARRAY['edit', 'recall', 'reaction', 'system'] OR COALESCE(0 < ANY (p_target), false)
       OR cardinality(array_remove(p_fwd_conv, NULL)) > 0 OR p_types IS NOT NULL THEN
        RAISE EXCEPTION 'chat_send_batch (979424e): plain messages only';
    END IF;
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
        WITH ins AS (
            INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, msg_no)
            SELECT t.c, t.q, t.s, t.id, t.b, v_at, t.q
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

    RETURN QUERY SELECT u.*, NULL::bigint, NULL::text, false, NULL::int, NULL::text, NULL::jsonb
                 FROM unnest(v_status, v_seq, v_sender, v_body, v_when) AS u;
END;
$$;
