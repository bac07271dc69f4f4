-- chatd's SQL functions, one file, re-applied (CREATE OR REPLACE) by every
-- migration run after the numbered migrations, so the database always runs
-- the functions of the binary that migrated it last. A change of a
-- function's arguments or result needs a numbered migration that drops the
-- old one first; everything else is edited here.
--
-- # chat_new_upload_id()
--
-- An upload (attachment) id as chat.NewUploadID makes one: 26 characters
-- of a-z and 2-7 (chat.ValidateUploadID), from 130 bits of the strong
-- random source gen_random_uuid() draws on, each character 5 bits of one
-- byte of two fresh UUIDs. chat_send_batch names a forward's copied files
-- with it.
CREATE OR REPLACE FUNCTION chat_new_upload_id() RETURNS text
LANGUAGE sql VOLATILE AS $f$
    SELECT string_agg(substr('abcdefghijklmnopqrstuvwxyz234567', (get_byte(b, i) & 31) + 1, 1), '' ORDER BY i)
    FROM (SELECT uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS b) r, generate_series(0, 25) AS i
$f$;

-- # chat_send_batch(p_kind, p_conv, p_sender, p_id, p_body, p_target, p_fwd_conv, p_fwd_seq, p_emoji, p_on, p_edit_window, p_recall_window, p_traceparent, p_tracestate, p_attach, p_types)
--
-- The only way an entry of a conversation's stream is written: messages,
-- edits, recalls, reactions and system entries (membership and settings
-- changes, written by the transaction that makes the change, after it
-- decided who may: store/system.go). Group commit calls it once per transaction
-- with the batch's changes as parallel arrays, one element per change, in
-- arrival order; a lone send is a batch of one. Within a batch, the rows
-- of one conversation are either all messages or a single change of
-- another kind (the batcher cuts batches so), or system entries alone
-- (store/system.go), so no row depends on another row of its batch.
--
--   p_kind    'message', 'edit', 'recall', 'reaction' or 'system'
--   p_body    message, edit: the body; system: the entry's JSON
--             (chat.SystemEntry)
--   p_target  edit/recall/reaction: the message's seq; message: the seq it
--             replies to (0: none)
--   p_fwd_*   message: the message it forwards (NULL: none); its body is
--             copied, p_body is ignored
--   p_emoji, p_on   reaction: the emoji, and set (true) or remove
--   p_edit_window, p_recall_window   NULL: no limit
--   p_traceparent, p_tracestate   the W3C trace context of each change,
--             copied into its outbox row ('' or a NULL array: not traced)
--   p_attach  message: its attachments, [{"uploadId","caption"}, ...] in
--             order (a NULL element: none; a NULL array: no change has
--             any); a message with attachments is the only change of its
--             conversation in the batch (the batcher cuts batches so)
--   p_types   the allowed attachment types ("type/subtype" or "type/*");
--             NULL when no change of the batch has attachments
--
-- Returns one row per change, in the same order:
--   o_status  0 new (o_seq, o_at), 1 duplicate (o_seq, o_sender, o_body,
--             o_at, o_count of the stored entry), 2 clientMsgId used by
--             another sender or for another change, 3 sender not a member,
--             4 no such conversation, 5 reaction already as asked (nothing
--             written), 6 already recalled (o_seq, o_at, o_sender: the
--             recall's; o_body: its clientMsgId), 7 target
--             not a message of the conversation, 8 target recalled, 9 not
--             allowed (not the sender, or past the window), 10 reply to a
--             seq that is not a message of the conversation, 11 forward
--             from a conversation the sender is not in, 12 forward of a
--             missing or recalled message, 13 reaction limit (20 distinct
--             emoji per user and message), 14 unknown upload, 15 another
--             user's upload, 16 an upload for another conversation (or an
--             avatar upload, which no message attaches), 17 an
--             upload attached already, 18 an upload not complete, 19 an
--             upload not of its declared size, 20 an upload of a type not
--             allowed (o_snippet: the upload id of 14-20), 22 blocked (a
--             direct conversation whose other member blocked the writer),
--             23 edit of a forward (a copy of another message: never edited),
--             24 edit to an empty body of a message without attachments
--             (a message of nothing; one with files may lose its text),
--             25 a new emoji on a message that carries 20 distinct emoji
--             already, whoever set them (chat.MaxReactionKinds);
--             (21, a forward of a message with attachments, is no longer
--             returned: the forward copies them);
--   o_body    the stored body of a duplicate; a new forward's copied body;
--             the first recall's clientMsgId (6);
--   o_target_sender, o_snippet, o_target_recalled
--             the target's (or replied-to message's, or forward source's)
--             sender, first 100 characters of its current body, recalled;
--   o_count   reaction: how many carry the emoji after the change (a
--             duplicate's: after the stored change, as its first answer);
--   o_msg_type, o_attachments
--             a new or duplicate message's type (NULL: text) and its
--             attachments as chat_attachments reads them;
--   o_recalled_at
--             a duplicate message's recall time, or a duplicate edit's
--             (its message's: a recall erases the edits too); NULL: not
--             recalled. A resend of a message or edit recalled since is
--             answered as recalled, not as an empty text.
--   o_edited_at
--             a duplicate message's last edit time (NULL: not edited): its
--             o_body is its current body, so a resend of a message edited
--             since is answered as edited, as history reads it, not as the
--             first answer's text with another body.
--   o_target_msg_type
--             a reply's: the type of the message it replies to (NULL: a
--             text, or recalled: a recall erases it), as o_snippet is
--             given (none when the writer can no longer reach it).
--
-- Rules, each decided once here:
--   - seq is the conversation's last_seq + 1, under the conversation row's
--     lock: per conversation, seqs are 1, 2, 3, ... with no gaps, in the
--     arrays' order; a change that fails or changes nothing uses no seq;
--   - only members write (a system entry is written for its actor, who
--     may just have left);
--   - a member of a group whose history is 'joined' reaches nothing
--     before their join: a reply to, forward of, edit, recall or reaction
--     of an earlier entry is refused as if it did not exist (7, 10, 12);
--   - in a direct conversation, a writer the other member blocked writes
--     no message, edit or reaction (a recall is still allowed); the
--     writer's member row says so (peer_blocked, kept with user_block by
--     the block's writers), so the check costs no lookup;
--   - (conversation, clientMsgId) is one change: a resend by its sender
--     answers the stored entry, another sender's (or another change's) is
--     a conflict: the same change is the same kind on the same target and,
--     for a reaction, the same emoji set or removed alike, since a
--     duplicate's answer is the request's own emoji and on, and for a
--     message the same reply (or none) and forward (or none), since a
--     duplicate's answer carries the request's replyTo or forwardedFrom
--     (o_target_sender, o_snippet, o_target_recalled as for a new one);
--     a resend by a writer who is no longer a member is answered too (it
--     committed while they were one), with their own entry only: no
--     snippet or recall of what it replies to, no reaction count; so is
--     one whose target is now before the writer's history floor (removed
--     and added back to a 'joined' group);
--     a later message of the batch with an earlier one's
--     clientMsgId repeats it, as a resend of a stored one would: the
--     same sender's with the same reply and forward is a duplicate, any
--     other a conflict;
--   - created_at is taken under the lock and never before the
--     conversation's previous message;
--   - edit: the message's sender, within p_edit_window of its created_at,
--     not recalled, not a forward (it shows its source's sender's words,
--     which its forwarder may not change), to an empty body only when the
--     message has attachments (as a send may); the message's body becomes the
--     edit's, and the edit entry keeps the body it replaced (prev_body);
--   - recall: the sender within p_recall_window, or a group's owner or
--     admin at any time; the body of the message and of all its edits
--     (their replaced bodies too) is erased, its reactions removed;
--   - reaction: any member, on a message not recalled; setting one that
--     is set, or removing one that is not, writes nothing; a user sets at
--     most 20 distinct emoji on a message (13), and a message carries at
--     most 20 distinct emoji (25: a new one past them is refused, one
--     already there may still be set, removal always goes; checked after
--     13, so a user at their own limit hears of that); a reaction set
--     keeps the seq at which its emoji appeared on the message (the
--     emoji's other rows', else its own entry's), the order history lists
--     them in;
--   - attachments: each a complete upload of the sender's, made for the
--     conversation (a message upload, not an avatar's), of its declared size and an allowed (sniffed) type,
--     not attached yet; the message takes them in order and its msg_type
--     by the first. Their rows are locked after the conversation rows, in
--     id order, so the upload expiry (which locks only them) cannot drop
--     one a send is attaching;
--   - forward: a copy of the source's attached files (rows of their own,
--     new ids, the source's blobs, metadata, positions and captions) and
--     its msg_type; a file the source lost meanwhile (a recall committed
--     between the judging statement and the copy) is not copied;
--   - recall: the message's attachments become recalled and their blobs
--     are queued for deletion (blob_deletion), in the same transaction;
--     a blob another live row (a forward's copy) still names is kept;
--   - only messages move last_message_at, last_message_seq and
--     message_count (unread counts and the inbox order); every entry moves
--     last_seq, and every entry but a system one its writer's read
--     watermark (one has read what one wrote; a system entry is written on
--     the actor's behalf and must not mark their unread messages read);
--   - every entry writes one outbox row referencing it (conversation_id,
--     seq; type by kind, system.new for a system entry; its change's
--     trace context), in seq order, while outbox rows are wanted (a row
--     in outbox_wanted, read by the deciding statement: see
--     chat_want_outbox); the relay encodes it.
--
-- Locks are taken in a fixed order, the order every other writer uses:
-- conversation rows by id before anything else, member rows by
-- (conversation, user), so concurrent batches and receipt flushes never
-- deadlock. A conversation's entries and reactions change only under its
-- row's lock. The deciding statement runs after the locks are granted and
-- so (READ COMMITTED, a volatile function: a fresh snapshot per statement)
-- sees what the previous holder committed.
--
-- A batch of plain messages runs three statements: the conversation
-- locks, the deciding statement (which also writes the entries, last_seq
-- and watermarks) and the answer; a fourth, the outbox rows, only while
-- a relay may read them. Replies, forwards, edits,
-- recalls, reactions and attachments are judged and written by statements
-- of their own that only batches having them run: every statement, and
-- every lookup in one, costs its executor start-up on each call whether
-- or not a row needs it (docs/benchmarks.md, "What the new kinds cost a
-- plain send"). The same holds for every expression a statement holds,
-- so a batch with no edit, recall, reaction, reply or forward (a plain
-- batch) runs chat_send_batch_plain instead (below): this function's own
-- text with the lifecycle's share of the deciding statement taken out.
-- Its text marks that share inline: in
--
--     /*lifecycle:*/X/*plain:Y*/
--
-- X is what this function runs and Y (often nothing) what the plain one
-- runs in its place; Y holds no "*/". Every rule stays written once, here;
-- a marker only says which parts a plain batch never needs.
--
-- The deciding statement's windows (and groupings) serve a conversation
-- with more than one change in the batch: a repeat of an earlier change's
-- clientMsgId, seqs and message counts running through its new entries.
-- A plain batch whose conversations are all different (a lone send, and
-- most small batches) needs none of them, and their nodes are a good part
-- of its executor start-up: it runs chat_send_batch_plain_distinct, the
-- plain function with every
--
--     /*batch:*/X/*distinct:Y*/
--
-- made Y, the value each window or grouping takes over a conversation's
-- lone change (docs/benchmarks.md, "A plain batch of distinct
-- conversations"). Given a batch with two new entries in one
-- conversation, it would give both the same seq (or clientMsgId): the
-- message table's keys refuse that, so it fails rather than write what
-- the other functions would not.
--
-- Every statement looks rows up by key for each element of a small array
-- (LATERAL ... LIMIT 1 keeps even a plan made on a fresh, unanalyzed
-- database on the indexes), so cached generic plans are safe, and they save
-- planning each statement of each call.
CREATE OR REPLACE FUNCTION chat_send_batch(
    p_kind text[], p_conv bigint[], p_sender bigint[], p_id uuid[], p_body text[], p_target bigint[],
    p_fwd_conv bigint[], p_fwd_seq bigint[], p_emoji text[], p_on boolean[],
    p_edit_window interval, p_recall_window interval,
    p_traceparent text[] DEFAULT NULL, p_tracestate text[] DEFAULT NULL,
    p_attach jsonb[] DEFAULT NULL, p_types text[] DEFAULT NULL)
RETURNS TABLE (o_status smallint, o_seq bigint, o_sender bigint, o_body text, o_at timestamptz,
               o_target_sender bigint, o_snippet text, o_target_recalled boolean, o_count integer,
               o_msg_type text, o_attachments jsonb, o_recalled_at timestamptz, o_edited_at timestamptz,
               o_target_msg_type text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n    int := cardinality(p_conv);
    -- Per change, what its attachments are judged to be (NULL arrays: no
    -- change of the batch has any): the first failing one's outcome and
    -- upload id, and the first one's content type.
    v_aerr smallint[]; v_abad text[]; v_atype text[];
    -- Per change, what the rules of replies, forwards, edits, recalls and
    -- reactions decide (NULL arrays: a batch with none of them, which
    -- never runs their lookups): v_ref the outcome of those rules (0
    -- allowed, NULL none apply); the target's or forward source's sender,
    -- current body and recall; the source's type; a reply's target's type;
    -- the target's earlier
    -- recall (seq, time, clientMsgId, sender); how many carry a reaction's emoji before the change,
    -- and the seq at which it appeared (NULL: nobody carries it).
    v_ref smallint[]; v_ref_sender bigint[]; v_ref_body text[]; v_ref_recalled boolean[]; v_f_msg_type text[];
    v_ref_msg_type text[];
    v_recall_seq bigint[]; v_recall_at timestamptz[]; v_recall_id text[]; v_recall_by bigint[]; v_total bigint[];
    v_appeared bigint[];
    -- Per change, the answer: outcome, seq, the stored entry's sender and
    -- body (a duplicate's) or the forwarded copy's body, time, a
    -- reaction's count after the change, a message's type, a duplicate
    -- message's recall.
    v_status smallint[]; v_seq bigint[]; v_sender bigint[]; v_body text[]; v_at timestamptz[]; v_count int[];
    v_msg_type text[]; v_recalled_at timestamptz[]; v_edited_at timestamptz[];
    -- Per change, a duplicate whose references the writer can no longer
    -- reach (they are no longer a member, or what it replies to or reacts
    -- to is from before their join now): its answer says nothing of them.
    v_unseen boolean[];
    -- Whether outbox rows are wanted (a relay may read them).
    v_outbox boolean;
BEGIN
    IF cardinality(p_kind) IS DISTINCT FROM v_n OR cardinality(p_sender) IS DISTINCT FROM v_n
       OR cardinality(p_id) IS DISTINCT FROM v_n OR cardinality(p_body) IS DISTINCT FROM v_n
       OR cardinality(p_target) IS DISTINCT FROM v_n OR cardinality(p_fwd_conv) IS DISTINCT FROM v_n
       OR cardinality(p_fwd_seq) IS DISTINCT FROM v_n OR cardinality(p_emoji) IS DISTINCT FROM v_n
       OR cardinality(p_on) IS DISTINCT FROM v_n OR (p_attach IS NOT NULL AND cardinality(p_attach) IS DISTINCT FROM v_n) THEN
        RAISE EXCEPTION 'chat_send_batch: argument arrays differ in length';
    END IF;

    -- A lone change's conversation is locked by its key alone: the sort,
    -- de-duplication and join of the general form are nodes built anew at
    -- every call. A forward's source conversation is locked too, in the
    -- same id order: the source is read by one statement and its files
    -- copied by a later one (a fresh snapshot each), and a recall of the
    -- source committing between them left a copy of a photo without its
    -- photo. Under the lock the recall comes wholly before the forward
    -- (refused) or after it.
    /*lifecycle:*/IF cardinality(array_remove(p_fwd_conv, NULL)) > 0 THEN
        PERFORM 1
        FROM (SELECT DISTINCT u.c FROM unnest(p_conv || p_fwd_conv) AS u(c) WHERE u.c IS NOT NULL ORDER BY u.c) k
        CROSS JOIN LATERAL (SELECT 1 FROM conversation cv WHERE cv.id = k.c LIMIT 1 FOR UPDATE) l;
    ELSIF/*plain:IF*/ v_n = 1 THEN
        PERFORM 1 FROM conversation cv WHERE cv.id = p_conv[1] FOR UPDATE;
    ELSE
        PERFORM 1
        FROM (SELECT DISTINCT u.c FROM unnest(p_conv) AS u(c) ORDER BY u.c) k
        CROSS JOIN LATERAL (SELECT 1 FROM conversation cv WHERE cv.id = k.c LIMIT 1 FOR UPDATE) l;
    END IF;

    IF p_types IS NOT NULL AND p_attach IS NOT NULL THEN
        PERFORM 1
        FROM (SELECT DISTINCT j.e->>'uploadId' AS id FROM unnest(p_attach) AS a(att)
              CROSS JOIN LATERAL jsonb_array_elements(a.att) AS j(e) WHERE a.att IS NOT NULL ORDER BY 1) k
        CROSS JOIN LATERAL (SELECT 1 FROM attachment t WHERE t.id = k.id LIMIT 1 FOR UPDATE) l;
        -- Each change's attachments judged, after the locks (a fresh
        -- snapshot): the first that fails (its outcome and id), and the
        -- first attachment's type. Apart from the deciding statement, so a
        -- batch without files never opens the attachment table.
        SELECT array_agg(v.a_err ORDER BY v.ord), array_agg(v.a_bad ORDER BY v.ord), array_agg(v.a_type ORDER BY v.ord)
        INTO v_aerr, v_abad, v_atype
        FROM (
            SELECT r.ord,
                   (array_agg(x.code ORDER BY x.pos) FILTER (WHERE x.code > 0))[1] AS a_err,
                   (array_agg(x.uid ORDER BY x.pos) FILTER (WHERE x.code > 0))[1] AS a_bad,
                   (array_agg(x.ctype ORDER BY x.pos))[1] AS a_type
            FROM unnest(p_attach, p_conv, p_sender) WITH ORDINALITY AS r(att, c, s, ord)
            LEFT JOIN LATERAL (
                SELECT j.pos, j.e->>'uploadId' AS uid, a.content_type AS ctype,
                       (CASE WHEN a.id IS NULL THEN 14
                             WHEN a.uploader_id <> r.s THEN 15
                             WHEN a.conversation_id IS DISTINCT FROM r.c OR a.purpose <> 'message' THEN 16
                             WHEN a.state IN ('attached', 'recalled') THEN 17
                             WHEN a.state <> 'complete' THEN 18
                             WHEN a.size IS DISTINCT FROM a.declared_size THEN 19
                             WHEN NOT (a.content_type = ANY (p_types)
                                       OR split_part(a.content_type, '/', 1) || '/*' = ANY (p_types)) THEN 20
                             ELSE 0 END)::smallint AS code
                FROM jsonb_array_elements(r.att) WITH ORDINALITY AS j(e, pos)
                LEFT JOIN LATERAL (SELECT t.id, t.uploader_id, t.conversation_id, t.purpose, t.state, t.size, t.declared_size,
                                          t.content_type
                                   FROM attachment t WHERE t.id = j.e->>'uploadId' LIMIT 1) a ON true
            ) x ON true
            GROUP BY r.ord
        ) v;
    END IF;

    -- The rules of replies, forwards, edits, recalls and reactions, after
    -- the locks, apart from the deciding statement: a batch of plain
    -- messages never runs them (every lookup a statement holds costs its
    -- executor start-up on every call, whether or not a row needs it).
    -- Whether the writer is a member, blocked, or repeating a change is
    -- the deciding statement's, which judges first.
    IF p_kind && ARRAY['edit', 'recall', 'reaction'] OR COALESCE(0 < ANY (p_target), false)
       OR cardinality(array_remove(p_fwd_conv, NULL)) > 0 THEN
        /*lifecycle:*/SELECT array_agg((CASE
                   WHEN r.k = 'message' AND r.fc IS NOT NULL AND fm.ok IS NULL THEN 11
                   WHEN r.k = 'message' AND r.fc IS NOT NULL
                        AND (fsrc.kind IS DISTINCT FROM 'message' OR fsrc.recalled_at IS NOT NULL OR r.fs <= fm.floor) THEN 12
                   WHEN r.k = 'message' AND r.tgt > 0 AND (tg.kind IS DISTINCT FROM 'message' OR r.tgt <= mb.floor) THEN 10
                   WHEN r.k NOT IN ('edit', 'recall', 'reaction') THEN NULL
                   WHEN tg.kind IS DISTINCT FROM 'message' OR r.tgt <= mb.floor THEN 7
                   WHEN r.k = 'recall' AND tg.recalled_at IS NOT NULL THEN 6
                   WHEN tg.recalled_at IS NOT NULL THEN 8
                   WHEN r.k = 'edit' AND (tg.sender_id <> r.s
                                          OR (p_edit_window IS NOT NULL AND clock_timestamp() > tg.created_at + p_edit_window)) THEN 9
                   WHEN r.k = 'edit' AND tg.forwarded_seq IS NOT NULL THEN 23
                   WHEN r.k = 'edit' AND r.b = '' AND tg.msg_type IS NULL THEN 24
                   WHEN r.k = 'recall' AND NOT ((tg.sender_id = r.s AND (p_recall_window IS NULL OR clock_timestamp() <= tg.created_at + p_recall_window))
                                                OR (mb.type = 'GROUP' AND mb.role IN ('owner', 'admin'))) THEN 9
                   WHEN r.k = 'reaction' AND COALESCE(rx.mine, false) = r.is_on THEN 5
                   WHEN r.k = 'reaction' AND r.is_on AND rx.mine_distinct >= 20 THEN 13
                   WHEN r.k = 'reaction' AND r.is_on AND rx.total = 0 AND rx.kinds >= 20 THEN 25
                   ELSE 0 END)::smallint ORDER BY r.ord),
               array_agg(CASE WHEN r.fc IS NOT NULL THEN fsrc.sender_id ELSE tg.sender_id END ORDER BY r.ord),
               array_agg(CASE WHEN r.fc IS NOT NULL THEN fsrc.body ELSE tg.body END ORDER BY r.ord),
               array_agg(tg.recalled_at IS NOT NULL ORDER BY r.ord), array_agg(fsrc.msg_type ORDER BY r.ord),
               array_agg(CASE WHEN r.k = 'message' AND r.fc IS NULL THEN tg.msg_type END ORDER BY r.ord),
               array_agg(rc.seq ORDER BY r.ord), array_agg(rc.created_at ORDER BY r.ord),
               array_agg(rc.client_msg_id::text ORDER BY r.ord), array_agg(rc.sender_id ORDER BY r.ord),
               array_agg(rx.total ORDER BY r.ord), array_agg(rx.appeared ORDER BY r.ord)
        INTO v_ref, v_ref_sender, v_ref_body, v_ref_recalled, v_f_msg_type, v_ref_msg_type, v_recall_seq, v_recall_at, v_recall_id,
             v_recall_by, v_total, v_appeared
        FROM unnest(p_kind, p_conv, p_sender, p_target, p_fwd_conv, p_fwd_seq, p_emoji, p_on, p_body)
             WITH ORDINALITY AS r(k, c, s, tgt, fc, fs, emoji, is_on, b, ord)
        -- The writer's role and, in a group that shows members only what
        -- came after their join, the seq at and below which they reach
        -- nothing (the floor).
        LEFT JOIN LATERAL (SELECT m.role, c.type,
                                  CASE WHEN c.type = 'GROUP' AND c.history_visible = 'joined' THEN m.join_seq ELSE 0 END AS floor
                           FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
                           WHERE m.conversation_id = r.c AND m.user_id = r.s LIMIT 1) mb ON true
        LEFT JOIN LATERAL (SELECT m.kind, m.sender_id, m.body, m.created_at, m.recalled_at, m.forwarded_seq, m.msg_type FROM message m
                           WHERE r.tgt > 0 AND m.conversation_id = r.c AND m.seq = r.tgt LIMIT 1) tg ON true
        LEFT JOIN LATERAL (SELECT m.seq, m.created_at, m.client_msg_id, m.sender_id FROM message m
                           WHERE r.k = 'recall' AND m.conversation_id = r.c
                           AND m.target_seq = r.tgt AND m.kind = 'recall' LIMIT 1) rc ON true
        LEFT JOIN LATERAL (SELECT bool_or(x.emoji = r.emoji AND x.user_id = r.s) AS mine,
                                  count(DISTINCT x.emoji) FILTER (WHERE x.user_id = r.s) AS mine_distinct,
                                  count(DISTINCT x.emoji) AS kinds,
                                  count(*) FILTER (WHERE x.emoji = r.emoji) AS total,
                                  min(x.appeared_seq) FILTER (WHERE x.emoji = r.emoji) AS appeared
                           FROM reaction x WHERE r.k = 'reaction' AND x.conversation_id = r.c AND x.seq = r.tgt) rx ON true
        LEFT JOIN LATERAL (SELECT true AS ok, CASE WHEN c.type = 'GROUP' AND c.history_visible = 'joined' THEN m.join_seq ELSE 0 END AS floor
                           FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
                           WHERE r.fc IS NOT NULL AND m.conversation_id = r.fc AND m.user_id = r.s LIMIT 1) fm ON true
        LEFT JOIN LATERAL (SELECT m.kind, m.sender_id, m.body, m.recalled_at, m.msg_type FROM message m
                           WHERE r.fc IS NOT NULL AND m.conversation_id = r.fc AND m.seq = r.fs LIMIT 1) fsrc ON true;/*plain:
        RAISE EXCEPTION 'chat_send_batch_plain: an edit, recall, reaction, reply or forward in the batch';*/
    END IF;

    -- The deciding statement judges every change and writes every table
    -- each new entry touches: each statement of a function costs its own
    -- executor start-up, most of what a small batch costs PostgreSQL. Its
    -- parts share one snapshot, taken after the locks; none reads what
    -- another writes. Member rows are locked in (conversation, user)
    -- order before they are updated (lk feeds the update whatever join the
    -- planner picks).
    WITH req AS (
        SELECT t.ord, t.k, t.c, t.s, t.id, t.b, /*lifecycle:*/t.tgt, t.fc, t.fs, t.emoji, t.is_on, /*plain:*/t.att
        FROM unnest(p_kind, p_conv, p_sender, p_id, p_body, /*lifecycle:*/p_target, p_fwd_conv, p_fwd_seq, p_emoji, p_on, /*plain:*/p_attach)
             WITH ORDINALITY AS t(k, c, s, id, b, /*lifecycle:*/tgt, fc, fs, emoji, is_on, /*plain:*/att, ord)
    ), cls AS (
        -- What each change is judged against, and pre: its outcome before
        -- the batch's other changes count (0: new unless an earlier change
        -- of the batch has its clientMsgId). Judged in the row that looks
        -- it up, not a level above: every level of this statement is a
        -- node the executor builds anew at each call (two such levels
        -- were 6% of a lone send's cost, docs/benchmarks.md).
        SELECT r.*, cv.last_seq, cv.last_message_at, cv.message_count,
               st.seq AS st_seq, st.sender_id AS st_sender, st.body AS st_body, st.created_at AS st_at,
               st.msg_type AS st_msg_type, st.recalled_at AS st_recalled_at, st.edited_at AS st_edited_at/*lifecycle:*/, mb.role IS NULL AS outsider, st.reaction_count AS st_count/*plain:*/,
               (CASE
                    WHEN cv.last_seq IS NULL THEN 4
                    -- A resend of the writer's own stored change is
                    -- answered with it before membership is judged: it
                    -- committed while they were a member (a removal
                    -- between the commit and the resend that a lost
                    -- PUBACK made must not turn it into a failure).
                    WHEN st.seq IS NOT NULL AND st.sender_id = r.s AND st.kind = r.k
                         /*lifecycle:*/AND (r.k IN ('message', 'system') OR st.target_seq = r.tgt)
                         AND (r.k <> 'reaction' OR (st.emoji = r.emoji AND st.reaction_on = r.is_on))
                         /*plain:*/AND (r.k <> 'message' OR (
                              /*lifecycle:*/st.reply_to IS NOT DISTINCT FROM NULLIF(r.tgt, 0)
                              AND st.forwarded_conversation_id IS NOT DISTINCT FROM r.fc
                              AND st.forwarded_seq IS NOT DISTINCT FROM r.fs/*plain:
                              st.reply_to IS NULL AND st.forwarded_conversation_id IS NULL AND st.forwarded_seq IS NULL*/)) THEN 1
                    WHEN mb.role IS NULL AND r.k <> 'system' THEN 3
                    WHEN st.seq IS NOT NULL THEN 2
                    WHEN r.k = 'system' THEN 0
                    WHEN mb.peer_blocked AND r.k IN ('message', 'edit', 'reaction') THEN 22
                    ELSE COALESCE(/*lifecycle:*/v_ref[r.ord::int], /*plain:*/v_aerr[r.ord::int], 0) END)::smallint AS pre
        FROM req r
        LEFT JOIN LATERAL (SELECT c.last_seq, c.last_message_at, c.message_count FROM conversation c
                           WHERE c.id = r.c LIMIT 1) cv ON true
        LEFT JOIN LATERAL (SELECT m.role, m.peer_blocked FROM conversation_member m
                           WHERE m.conversation_id = r.c AND m.user_id = r.s LIMIT 1) mb ON true
        LEFT JOIN LATERAL (SELECT m.seq, m.sender_id, m.body, m.created_at, m.edited_at, m.kind, /*lifecycle:*/m.target_seq, /*plain:*/m.msg_type,
                                  m.recalled_at, /*lifecycle:*/m.emoji, m.reaction_on, m.reaction_count, /*plain:*/m.reply_to, m.forwarded_conversation_id, m.forwarded_seq FROM message m
                           WHERE m.conversation_id = r.c AND m.client_msg_id = r.id LIMIT 1) st ON true
    ), firsts AS (
        -- The first new change of each clientMsgId is new; later ones of
        -- the batch repeat it (or conflict). A conversation with a change
        -- of another kind than message has nothing else in the batch.
        -- (A change alone in its conversation is its clientMsgId's first.)
        SELECT j.*,
               /*batch:*/count(*) FILTER (WHERE j.pre = 0) OVER byid/*distinct:(j.pre = 0)::int*/ AS nth,
               /*batch:*/(array_agg(j.s) FILTER (WHERE j.pre = 0) OVER byid)[1]/*distinct:CASE WHEN j.pre = 0 THEN j.s END*/ AS first_s,
               -- (a forward's body is the one it copies, as the first's answer)
               /*batch:*/(array_agg(/*lifecycle:*/CASE WHEN j.fc IS NOT NULL THEN v_ref_body[j.ord::int] ELSE j.b END/*plain: j.b*/)
                    FILTER (WHERE j.pre = 0) OVER byid)[1]/*distinct:CASE WHEN j.pre = 0 THEN j.b END*/ AS first_b
               -- (what the first replies to or forwards: a repeat with
               -- other references is a conflict, as against a stored one)
               /*lifecycle:*/, (array_agg(format('%s/%s/%s', j.tgt, j.fc, j.fs)) FILTER (WHERE j.pre = 0) OVER byid)[1] AS first_ref/*plain:*/
        FROM cls j
        /*batch:*/WINDOW byid AS (PARTITION BY j.c, j.id ORDER BY j.ord)/*distinct:*/
    ), numbered AS (
        -- (A change alone in its conversation takes the seq after its
        -- last_seq if it is new.)
        SELECT f.*,
               (CASE WHEN f.pre <> 0 THEN f.pre WHEN f.nth = 1 THEN 0
                     WHEN f.first_s = f.s/*lifecycle:*/ AND f.first_ref = format('%s/%s/%s', f.tgt, f.fc, f.fs)/*plain:*/ THEN 1 ELSE 2 END)::smallint AS status,
               f.last_seq + /*batch:*/count(*) FILTER (WHERE f.pre = 0 AND f.nth = 1) OVER byconv/*distinct:(f.pre = 0 AND f.nth = 1)::int*/ AS run_seq,
               f.message_count + /*batch:*/count(*) FILTER (WHERE f.pre = 0 AND f.nth = 1 AND f.k = 'message') OVER byconv/*distinct:(f.pre = 0 AND f.nth = 1 AND f.k = 'message')::int*/ AS run_msg
        FROM firsts f
        /*batch:*/WINDOW byconv AS (PARTITION BY f.c ORDER BY f.ord)/*distinct:*/
    ), clock AS (
        -- Times follow seq order: never before a conversation's previous
        -- message, whatever the clocks did.
        SELECT GREATEST(clock_timestamp(), max(x.last_message_at)) AS at FROM cls x
    ), dec AS MATERIALIZED (
        -- The answer to each change, and for a new entry what is written.
        SELECT q.ord, q.k, q.c, q.s, q.id, /*lifecycle:*/q.tgt, q.fc, q.fs, q.emoji, q.is_on, /*plain:*/q.status, q.run_msg,
               q.st_recalled_at, q.st_edited_at/*lifecycle:*/, q.outsider/*plain:*/,
               -- A repeat within the batch answers its first's seq.
               /*lifecycle:*/CASE WHEN q.status = 6 THEN v_recall_seq[q.ord::int] ELSE /*plain:*/
                    COALESCE(q.st_seq, /*batch:*/max(q.run_seq) FILTER (WHERE q.status = 0) OVER (PARTITION BY q.c, q.id)/*distinct:CASE WHEN q.status = 0 THEN q.run_seq END*/)
               /*lifecycle:*/END/*plain:*/ AS seq,
               /*lifecycle:*/CASE WHEN q.status = 6 THEN v_recall_by[q.ord::int] ELSE /*plain:*/
                    COALESCE(q.st_sender, q.first_s) /*lifecycle:*/END/*plain:*/ AS o_sender,
               /*lifecycle:*/CASE WHEN q.fc IS NOT NULL THEN v_ref_body[q.ord::int] ELSE q.b END/*plain: q.b*/ AS body,
               CASE WHEN q.status = 0 THEN NULL /*lifecycle:*/WHEN q.status = 6 THEN v_recall_id[q.ord::int]/*plain:*/
                    ELSE COALESCE(q.st_body, q.first_b) END AS st_body,
               /*lifecycle:*/CASE WHEN q.status = 6 THEN v_recall_at[q.ord::int] ELSE /*plain:*/
                    COALESCE(q.st_at, k.at) /*lifecycle:*/END/*plain:*/ AS at,
               /*lifecycle:*/CASE WHEN q.k <> 'reaction' THEN NULL
                    WHEN q.status = 0 THEN COALESCE(v_total[q.ord::int], 0)::int + CASE WHEN q.is_on THEN 1 ELSE -1 END
                    -- A resend answers the stored entry, as its first
                    -- answer did, not what others reacted since.
                    WHEN q.status = 1 THEN q.st_count
                    ELSE COALESCE(v_total[q.ord::int], 0)::int END AS cnt,/*plain:*/
               CASE WHEN q.status <> 0 THEN q.st_msg_type
                    /*lifecycle:*/WHEN q.fc IS NOT NULL THEN v_f_msg_type[q.ord::int]/*plain:*/
                    WHEN q.att IS NULL THEN NULL
                    WHEN v_atype[q.ord::int] LIKE 'image/%' THEN 'image' WHEN v_atype[q.ord::int] LIKE 'audio/%' THEN 'audio'
                    WHEN v_atype[q.ord::int] LIKE 'video/%' THEN 'video' ELSE 'file' END AS msg_type
        FROM numbered q CROSS JOIN clock k
        -- In arrival order, the answer's (below): one sort here, where
        -- array_agg(... ORDER BY) of each of the answer's arrays sorted
        -- its own input (PostgreSQL 15 sorts per ordered aggregate).
        ORDER BY q.ord
    ), fresh AS (
        SELECT d.* FROM dec d WHERE d.status = 0
    ), ins AS (
        INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, created_at, kind, /*lifecycle:*/target_seq, /*plain:*/
                             msg_no, /*lifecycle:*/reply_to, forwarded_conversation_id, forwarded_seq, forwarded_sender_id,
                             emoji, reaction_on, reaction_count, /*plain:*/msg_type)
        SELECT f.c, f.seq, f.s, f.id, /*lifecycle:*/CASE WHEN f.k IN ('message', 'edit', 'system') THEN f.body ELSE '' END/*plain: f.body*/,
               f.at, f.k, /*lifecycle:*/CASE WHEN f.k IN ('edit', 'recall', 'reaction') THEN f.tgt END, /*plain:*/f.run_msg,
               /*lifecycle:*/CASE WHEN f.k = 'message' AND f.tgt > 0 THEN f.tgt END,
               f.fc, f.fs, CASE WHEN f.fc IS NOT NULL THEN v_ref_sender[f.ord::int] END,
               CASE WHEN f.k = 'reaction' THEN f.emoji END, CASE WHEN f.k = 'reaction' THEN f.is_on END, f.cnt,
               /*plain:*/CASE WHEN f.k = 'message' THEN f.msg_type END
        FROM fresh f
    ), conv AS (
        UPDATE conversation c SET last_seq = u.last,
               last_message_at = CASE WHEN u.msgs > 0 THEN u.at ELSE c.last_message_at END,
               last_message_seq = COALESCE(u.last_msg, c.last_message_seq),
               message_count = c.message_count + u.msgs
        FROM (/*batch:*/SELECT f.c, max(f.seq) AS last, max(f.seq) FILTER (WHERE f.k = 'message') AS last_msg,
                     count(*) FILTER (WHERE f.k = 'message') AS msgs, max(f.at) AS at
              FROM fresh f GROUP BY f.c/*distinct:SELECT f.c, f.seq AS last, CASE WHEN f.k = 'message' THEN f.seq END AS last_msg,
                     (f.k = 'message')::int AS msgs, f.at AS at
              FROM fresh f*/) u
        WHERE c.id = u.c
    ), lk AS MATERIALIZED (
        SELECT w.c, w.s, w.q
        FROM (SELECT f.c, f.s, /*batch:*/max(f.seq)/*distinct: f.seq*/ AS q FROM fresh f WHERE f.k <> 'system'
              /*batch:*/GROUP BY f.c, f.s /*distinct:*/ORDER BY f.c, f.s) w
        CROSS JOIN LATERAL (SELECT 1 FROM conversation_member m
                            WHERE m.conversation_id = w.c AND m.user_id = w.s LIMIT 1 FOR UPDATE) l
    ), reader AS (
        UPDATE conversation_member m SET last_read_seq = GREATEST(m.last_read_seq, lk.q)
        FROM lk
        WHERE m.conversation_id = lk.c AND m.user_id = lk.s
    )
    -- The answer's arrays, in arrival order because dec's rows are: a
    -- materialized CTE is read back in the order its query wrote it, and
    -- an aggregate without GROUP BY over that lone scan takes the rows in
    -- the scan's order. This is the sorted-input form PostgreSQL's manual
    -- gives for ordered aggregates ("supplying the input values from a
    -- sorted subquery will usually work"), which fails only when the
    -- aggregate's level reorders (a join, a grouping) or splits its input
    -- (parallel workers, never used by a statement that writes); this
    -- level has none of them. The store's tests of mixed batches answer
    -- in the wrong order without dec's ORDER BY.
    SELECT array_agg(d.status), array_agg(d.seq), array_agg(d.o_sender),
           array_agg(/*lifecycle:*/CASE WHEN d.status = 0 AND d.fc IS NOT NULL THEN d.body ELSE d.st_body END/*plain: d.st_body*/),
           array_agg(d.at),
           array_agg(CASE WHEN d.k = 'message' AND d.status IN (0, 1) THEN d.msg_type END),
           array_agg(CASE WHEN d.k IN ('message', 'edit') AND d.status = 1 THEN d.st_recalled_at END),
           array_agg(CASE WHEN d.k = 'message' AND d.status = 1 THEN d.st_edited_at END)
           -- (A plain batch has no counts, and no references a duplicate's
           -- answer could show: its v_count and v_unseen stay NULL.)
           /*lifecycle:*/, array_agg(d.cnt),
           array_agg(d.status = 1 AND (d.outsider OR COALESCE(v_ref[d.ord::int], 0) IN (7, 10)))/*plain:*/,
           -- Whether a relay may read outbox rows (chat_want_outbox,
           -- below). By its key: a lone send spent 12 µs less of its
           -- backend's CPU than with the table's scan (docs/benchmarks.md,
           -- "outbox rows only for a relay").
           (SELECT EXISTS (SELECT 1 FROM outbox_wanted w WHERE w.one))
    INTO v_status, v_seq, v_sender, v_body, v_at, v_msg_type, v_recalled_at, v_edited_at/*lifecycle:*/, v_count, v_unseen/*plain:*/, v_outbox
    FROM dec d;

    -- Every new entry's outbox row, in seq order (generate_series yields
    -- the changes in arrival order, which the ids follow), only while a
    -- relay may read them: a statement of its own, so a node without
    -- Kafka neither starts the insert's executor nor fires the outbox's
    -- statement trigger, as a data-modifying part of the deciding
    -- statement would even when it wrote no row.
    IF v_outbox THEN
        INSERT INTO outbox (msg_key, type, conversation_id, seq, traceparent, tracestate)
        SELECT p_conv[i]::text, CASE p_kind[i] WHEN 'message' THEN 'message.new' /*lifecycle:*/WHEN 'edit' THEN 'message.edited'
                                   WHEN 'recall' THEN 'message.recalled' WHEN 'system' THEN 'system.new'
                                   ELSE 'reaction.updated'/*plain: ELSE 'system.new'*/ END,
               p_conv[i], v_seq[i], NULLIF(p_traceparent[i], ''), NULLIF(p_tracestate[i], '')
        FROM generate_series(1, v_n) AS i
        WHERE v_status[i] = 0;
    END IF;

    -- What edits, recalls and reactions do to their targets is written
    -- apart, and only by batches that have them, for the reason the
    -- lookups are: a batch of messages neither opens the reaction table
    -- nor updates message rows. A conversation with such a change has
    -- nothing else in the batch (firsts), so this statement touches no
    -- row the one before wrote. (The plain functions, which refuse such
    -- batches, do not even test for them here or below.)
    /*lifecycle:*/IF p_kind && ARRAY['edit', 'recall', 'reaction'] THEN
        WITH fresh AS MATERIALIZED (
            SELECT f.* FROM unnest(p_kind, p_conv, p_sender, p_body, p_target, p_emoji, p_on, v_status, v_at, v_seq, v_ref_body,
                                   v_appeared)
                            AS f(k, c, s, b, tgt, emoji, is_on, status, at, seq, prev, appeared)
            WHERE f.status = 0 AND f.k IN ('edit', 'recall', 'reaction')
        ), edited AS (
            UPDATE message m SET body = f.b, edited_at = f.at
            FROM fresh f WHERE f.k = 'edit' AND m.conversation_id = f.c AND m.seq = f.tgt
        ), replaced AS (
            -- The edit keeps the body it replaces (the target's, read
            -- under the conversation's lock), so what the message said at
            -- any seq stays known (chat_message_at). Written here, not by
            -- the deciding statement's insert, which plain sends run.
            UPDATE message m SET prev_body = f.prev
            FROM fresh f WHERE f.k = 'edit' AND m.conversation_id = f.c AND m.seq = f.seq
        ), recalled AS (
            -- The message and every edit of it lose their bodies (an
            -- edit's replaced body too), and the message its type: a
            -- recalled photo reads as a recalled message, nothing more.
            UPDATE message m SET body = '', prev_body = NULL, msg_type = NULL, recalled_at = f.at, recalled_by = f.s
            FROM fresh f
            WHERE f.k = 'recall' AND m.conversation_id = f.c
              AND (m.seq = f.tgt OR (m.target_seq = f.tgt AND m.kind = 'edit'))
        ), unreacted AS (
            DELETE FROM reaction x USING fresh f
            WHERE x.conversation_id = f.c AND x.seq = f.tgt
              AND (f.k = 'recall' OR (f.k = 'reaction' AND NOT f.is_on AND x.user_id = f.s AND x.emoji = f.emoji))
        )
        -- (appeared_seq: where the emoji appeared, this entry when it
        -- takes its count from 0 to 1: history lists reactions in that
        -- order, as live events show them, store/entries.go)
        INSERT INTO reaction (conversation_id, seq, user_id, emoji, created_at, appeared_seq)
        SELECT f.c, f.tgt, f.s, f.emoji, f.at, COALESCE(f.appeared, f.seq) FROM fresh f WHERE f.k = 'reaction' AND f.is_on;
    END IF;/*plain:*/

    -- Attachments are written apart, and only by batches that have them:
    -- every table a statement writes costs its executor start-up (opening
    -- the table and its indexes) even when no row changes, and a send
    -- without files must not pay for them.
    IF p_types IS NOT NULL AND p_attach IS NOT NULL THEN
        UPDATE attachment t SET state = 'attached', seq = f.seq, position = j.pos,
               caption = NULLIF(j.e->>'caption', '')
        FROM unnest(p_kind, p_attach, v_status, v_seq) AS f(k, att, status, seq)
        CROSS JOIN LATERAL jsonb_array_elements(f.att) WITH ORDINALITY AS j(e, pos)
        WHERE f.status = 0 AND f.k = 'message' AND f.att IS NOT NULL AND t.id = j.e->>'uploadId';
    END IF;
    -- A forward's files are copies of its source's rows, naming the same
    -- blobs; the forwarder put them into the conversation, so they are
    -- the forwarder's (GET /v1/uploads/{id} answers its uploader alone).
    -- Only batches with a forward run this (an expression on the
    -- arguments decides, not a statement).
    /*lifecycle:*/IF cardinality(array_remove(p_fwd_conv, NULL)) > 0 THEN
        INSERT INTO attachment (id, blob_key, uploader_id, conversation_id, name, declared_type, declared_size, state,
                                created_at, url_expires_at, completed_at, content_type, size, sha256, width, height,
                                duration_ms, thumb_state, thumb_width, thumb_height, thumb_size, seq, position, caption)
        SELECT chat_new_upload_id(), a.blob_key, f.s, f.c, a.name, a.declared_type, a.declared_size, 'attached',
               f.at, a.url_expires_at, a.completed_at, a.content_type, a.size, a.sha256, a.width, a.height,
               a.duration_ms, a.thumb_state, a.thumb_width, a.thumb_height, a.thumb_size, f.seq, a.position, a.caption
        FROM unnest(p_kind, p_conv, p_sender, p_fwd_conv, p_fwd_seq, v_status, v_seq, v_at, v_msg_type)
             WITH ORDINALITY AS f(k, c, s, fc, fs, status, seq, at, msg_type, ord)
        JOIN attachment a ON a.conversation_id = f.fc AND a.seq = f.fs AND a.state = 'attached'
        WHERE f.status = 0 AND f.k = 'message' AND f.fc IS NOT NULL AND f.msg_type IS NOT NULL
        ORDER BY f.ord, a.position;
    END IF;
    IF 'recall' = ANY (p_kind) THEN
        -- A recalled message's files are gone for everyone: the row keeps
        -- only what a fetch needs to answer 410, and the bytes are queued
        -- for deletion (a minute's grace lets a thumbnail being made land
        -- before the deletion, which takes it too). DO UPDATE, not DO
        -- NOTHING: a deletion round holding the row of a blob a forward's
        -- copy still named when it looked forgets that row at its commit,
        -- so this waits for the round and queues the blob again after it
        -- (store.requeueSQL). Two recalled copies of one file name one
        -- blob: DISTINCT, as DO UPDATE may touch a row once.
        WITH unattached AS (
            UPDATE attachment t SET state = 'recalled', name = '', caption = NULL, sha256 = NULL
            FROM unnest(p_kind, p_conv, p_target, v_status) AS f(k, c, tgt, status)
            WHERE f.status = 0 AND f.k = 'recall' AND t.conversation_id = f.c AND t.seq = f.tgt
              AND t.seq IS NOT NULL AND t.state = 'attached'
            RETURNING t.blob_key
        )
        INSERT INTO blob_deletion (blob_key, reason, not_before)
        SELECT DISTINCT u.blob_key, 'recall', now() + interval '1 minute' FROM unattached u
        ON CONFLICT (blob_key) DO UPDATE SET not_before = GREATEST(blob_deletion.not_before, EXCLUDED.not_before);
    END IF;/*plain:*/

    -- A duplicate answered to a writer who left or was removed, or whose
    -- target is now below their history floor (unseen), carries their own
    -- entry, not what others did since: no snippet or recall of what it
    -- replies to, no reaction count. The arrays are read by index, not
    -- unnested side by side: every function of a FROM fills a tuplestore
    -- of its own at each call, ten of them for one row of a lone send.
    RETURN QUERY
        SELECT v_status[i], v_seq[i], v_sender[i], v_body[i], v_at[i], v_ref_sender[i],
               CASE WHEN v_status[i] BETWEEN 14 AND 20 THEN v_abad[i]
                    WHEN v_unseen[i] THEN NULL ELSE left(v_ref_body[i], 100) END,
               NOT v_unseen[i] AND COALESCE(v_ref_recalled[i], false),
               CASE WHEN NOT v_unseen[i] THEN v_count[i] END, v_msg_type[i],
               CASE WHEN v_msg_type[i] IS NOT NULL THEN chat_attachments(p_conv[i], v_seq[i]) END, v_recalled_at[i], v_edited_at[i],
               CASE WHEN v_unseen[i] THEN NULL ELSE v_ref_msg_type[i] END
        FROM generate_series(1, v_n) AS i;
END;
$$;

-- # chat_send_batch_plain(the arguments of chat_send_batch)
--
-- chat_send_batch for a plain batch: messages without a reply or forward
-- (attachments allowed), and system entries. It takes the same arguments
-- and answers the same rows as chat_send_batch would for such a batch,
-- and refuses (raises) a batch with an edit, recall, reaction, reply or
-- forward. Made here, at every migration, from chat_send_batch as just
-- defined: its definition with every /*lifecycle:*/X/*plain:Y*/ replaced
-- by Y, so the two cannot drift (store's test
-- TestPlainSendFunctionIsTheFullOneWithoutTheLifecycle checks the
-- database's pair against this rule). What it saves: the executor's
-- start-up of the lifecycle's expressions in the deciding statement,
-- about 30 of the 40-45 µs of backend CPU the lifecycle cost a lone plain
-- send (docs/benchmarks.md, "A plain batch's own function"). A numbered
-- migration that changes chat_send_batch's arguments or result drops this
-- one too.
--
-- # chat_send_batch_plain_distinct(the arguments of chat_send_batch)
--
-- chat_send_batch_plain for a plain batch with at most one change in each
-- conversation: the same answer and rows, without the deciding
-- statement's windows and groupings; made here too, from
-- chat_send_batch_plain's text with every /*batch:*/X/*distinct:Y*/
-- replaced by Y (TestTheDistinctSendFunctionIsThePlainOneWithoutTheWindows).
-- A numbered migration that drops chat_send_batch drops this one too.
DO $do$
DECLARE
    v_full text := pg_get_functiondef('chat_send_batch(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[],'
                                      ' text[], boolean[], interval, interval, text[], text[], jsonb[], text[])'::regprocedure);
    v_plain text := regexp_replace(regexp_replace(v_full, 'chat_send_batch\(', 'chat_send_batch_plain('),
                                   '/\*lifecycle:\*/.*?/\*plain:(.*?)\*/', '\1', 'g');
BEGIN
    EXECUTE v_plain;
    EXECUTE regexp_replace(regexp_replace(v_plain, 'chat_send_batch_plain\(', 'chat_send_batch_plain_distinct('),
                           '/\*batch:\*/.*?/\*distinct:(.*?)\*/', '\1', 'g');
END
$do$;

-- # chat_want_outbox()
--
-- Outbox rows are written only while a relay may read them: while
-- outbox_wanted (migration 0041) has its row. Without Kafka nothing ever
-- reads the outbox, and its rows cost every message an insert, a
-- statement trigger, their WAL and the pruner's deletes and vacuum
-- (docs/benchmarks.md, "outbox rows only for a relay").
--
--   - Turned on by this function, which a node with Kafka runs when it
--     migrates, in the transaction that re-applies this file (store.Migrate),
--     before its relay or Kafka consumer starts and before it accepts
--     clients; and its relay runs it when it takes the lease and every
--     minute while it holds it (seen_at). Migration 0041 turned it on if
--     a relay (of an older chatd) held the lease or stood by for it then.
--   - Read by every writer of outbox rows in its writing transaction:
--     the send functions (their deciding statement), the store's other
--     events (store/outbox.go, insertOutboxSQL) and the notify trigger.
--   - Turned off only by the pruner of a node without Kafka
--     (internal/relay/pruner.go), when no relay has run this function for
--     the pruner's retention, none holds the lease and no relay session
--     is connected, in one statement.
--
-- Turning it on takes outbox_wanted's ACCESS EXCLUSIVE lock before the
-- row is inserted. Every writer's statement that reads the table holds
-- its ACCESS SHARE lock until its transaction ends, and takes its
-- snapshot after its locks: a writer that read "off" commits before the
-- row does, and a writer that reads after waits for the row's commit and
-- sees it. So every write that commits after the row does writes its
-- outbox rows, and a relay started after it misses nothing. (SHARE ROW
-- EXCLUSIVE first: two nodes turning it on at once queue rather than
-- deadlock on the upgrade; writers do not wait for it.) While it is on,
-- a run only moves seen_at: a row lock, no wait for writers.
CREATE OR REPLACE FUNCTION chat_want_outbox() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE outbox_wanted IN SHARE ROW EXCLUSIVE MODE;
    UPDATE outbox_wanted SET seen_at = now();
    IF NOT FOUND THEN
        LOCK TABLE outbox_wanted IN ACCESS EXCLUSIVE MODE;
        INSERT INTO outbox_wanted (one, seen_at) VALUES (true, now());
    END IF;
END;
$$;

-- # chat_outbox_notify (trigger on outbox, statement level)
--
-- Wakes the outbox relay (LISTEN chat_outbox) when events commit. Hot write
-- paths set chat.defer_notify for their transaction and send the wake-up
-- after COMMIT, in a transaction of its own and only when a relay on another
-- node needs it: a NOTIFY inside a writing transaction holds PostgreSQL's
-- global notify lock from pre-commit through the WAL flush, so every
-- notifying commit would wait for the previous one's fsync. While outbox
-- rows are not wanted (chat_want_outbox) no relay listens and no row was
-- written: no NOTIFY.
CREATE OR REPLACE FUNCTION chat_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('chat.defer_notify', true) = 'on' THEN
        RETURN NULL;
    END IF;
    -- (A test of its own: a query in the expression above would make
    -- every deferred call run it too.)
    IF NOT EXISTS (SELECT 1 FROM outbox_wanted) THEN
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

-- # chat_member_push_forget (trigger on conversation_member, row level)
--
-- A member who leaves (or is removed) takes their settings, their waiting
-- notification and their push_last row along. A notification that was
-- claimed ('sending': it may have reached a device; 'sent') stays, as do
-- remove pushes: it is on their devices until a recall of one of its
-- messages takes it away (a remove is sent to a former member too; it
-- carries nothing of the conversation), and a claimed one is otherwise
-- never sent again (the claim finds no member).
--
-- It first takes the conversation's push_cursor row (made if missing, as
-- the decider would make it), which a push decision holds, locked, before
-- it reads the members: a decision under way commits first, and the
-- DELETE below (a statement of its own, so it sees that commit) takes its
-- job for the member away; a decision that comes later waits for this
-- transaction and no longer sees the member. So no job is left for a
-- member removed while their push was decided.
CREATE OR REPLACE FUNCTION chat_member_push_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO push_cursor (conversation_id, seq) VALUES (OLD.conversation_id, 0)
    ON CONFLICT (conversation_id) DO NOTHING;
    PERFORM 1 FROM push_cursor WHERE conversation_id = OLD.conversation_id FOR SHARE;
    DELETE FROM member_settings WHERE conversation_id = OLD.conversation_id AND user_id = OLD.user_id;
    DELETE FROM push_job WHERE user_id = OLD.user_id AND conversation_id = OLD.conversation_id
                           AND kind = 'message' AND state = 'pending';
    DELETE FROM push_last WHERE user_id = OLD.user_id AND conversation_id = OLD.conversation_id;
    RETURN NULL;
END;
$$;

-- # chat_attachments(p_conv, p_seq)
--
-- A message's attachments as members see them, in order: the JSON of
-- chat.Attachment. The one definition, read by chat_entry (history,
-- catch-up, the relay) and by chat_send_batch's answer (the live event).
CREATE OR REPLACE FUNCTION chat_attachments(p_conv bigint, p_seq bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'id', a.id, 'name', a.name, 'contentType', a.content_type, 'size', a.size, 'sha256', a.sha256,
               'width', a.width, 'height', a.height, 'durationMs', NULLIF(a.duration_ms, 0), 'caption', a.caption,
               'thumbnail', CASE WHEN a.thumb_state = 'ready' THEN jsonb_build_object(
                   'contentType', 'image/jpeg', 'width', a.thumb_width, 'height', a.thumb_height, 'size', a.thumb_size) END))
           ORDER BY a.position)
    FROM attachment a
    -- seq IS NOT NULL: the predicate of attachment_message_idx, stated
    -- so every plan can use it.
    WHERE a.conversation_id = p_conv AND a.seq = p_seq AND a.seq IS NOT NULL AND a.state = 'attached'
$$;

-- # chat_entry (view)
--
-- An entry of a conversation's stream as readers see it (history,
-- catch-up, the outbox relay): the message row with what its reply_to
-- points at now (sender, first 100 characters of its current body,
-- recalled, and its type: reply_msg_type, NULL for a text and once
-- recalled, since a recall erases msg_type) and its attachments (none
-- once recalled). Reading entries through it keeps those rules in one
-- place. (New columns go at the end: CREATE OR REPLACE VIEW adds them
-- there only.)
--
-- The quoted message is looked up by key for each reply, in a subquery
-- kept apart (OFFSET 0): joined plainly, a planner expecting one message
-- in the conversation (a group that grew since message was last analyzed)
-- scanned the conversation's messages once per entry of the page, reading
-- its equality on the join as a constant (measured: 2,000,000 rows, 350
-- ms for a history page of 50 in a group of 40,000 messages).
CREATE OR REPLACE VIEW chat_entry AS
SELECT m.conversation_id, m.seq, m.kind, m.sender_id, m.client_msg_id, m.body, m.created_at,
       m.target_seq, m.emoji, m.reaction_on, m.reaction_count, m.edited_at, m.recalled_at,
       m.reply_to, r.sender_id AS reply_sender, left(r.body, 100) AS reply_snippet,
       r.recalled_at IS NOT NULL AS reply_recalled,
       m.forwarded_conversation_id, m.forwarded_seq, m.forwarded_sender_id,
       m.msg_type,
       CASE WHEN m.msg_type IS NOT NULL AND m.recalled_at IS NULL THEN chat_attachments(m.conversation_id, m.seq) END AS attachments,
       r.msg_type AS reply_msg_type
FROM message m
LEFT JOIN LATERAL (
    SELECT r.sender_id, r.body, r.recalled_at, r.msg_type FROM message r
    WHERE m.reply_to IS NOT NULL AND r.conversation_id = m.conversation_id AND r.seq = m.reply_to
    OFFSET 0) r ON true;

-- # chat_message_at(p_conv, p_seq, p_upto)
--
-- Message p_seq of p_conv as it read when entry p_upto was the newest: its
-- body and edited_at now, unless an edit after p_upto rewrote it; then
-- the body that edit replaced (its prev_body) and the time of the last
-- edit at or before p_upto (no edited_at when none). An edit written
-- before prev_body was kept (migration 0039) has none: then the body of
-- the last edit at or before p_upto, or, none, an empty body. No row when
-- there is no such message. A removed member's catch-up of what they were
-- owed up to their leave reads messages and reply snippets through it
-- (Sessions.SinceMany): what was written after the leave, edits included,
-- is not theirs to read.
CREATE OR REPLACE FUNCTION chat_message_at(p_conv bigint, p_seq bigint, p_upto bigint)
RETURNS TABLE (body text, edited_at timestamptz) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN nxt.seq IS NOT NULL THEN COALESCE(nxt.prev_body, prev.body, '') ELSE m.body END,
           CASE WHEN nxt.seq IS NOT NULL THEN prev.created_at ELSE m.edited_at END
    FROM message m
    LEFT JOIN LATERAL (
        SELECT x.seq, x.prev_body FROM message x
        WHERE x.conversation_id = p_conv AND x.target_seq = p_seq AND x.kind = 'edit' AND x.seq > p_upto
        ORDER BY x.seq LIMIT 1) nxt ON true
    LEFT JOIN LATERAL (
        SELECT x.body, x.created_at FROM message x
        WHERE nxt.seq IS NOT NULL AND x.conversation_id = p_conv AND x.target_seq = p_seq AND x.kind = 'edit' AND x.seq <= p_upto
        ORDER BY x.seq DESC LIMIT 1) prev ON true
    WHERE m.conversation_id = p_conv AND m.seq = p_seq AND m.kind = 'message'
$$;

-- # chat_unread(p_conv, p_read_seq, p_message_count)
--
-- A member's unread count: the messages (not edits, recalls, reactions or
-- system entries) after their read watermark, wherever it points, i.e.
-- the conversation's message_count less the msg_no of the newest entry at
-- or before the watermark; two key lookups. The inbox and the push badge
-- both count with it. Not inlined (the planner inlines no sub-select):
-- each row is a call, so the badge calls it only for the conversations
-- with a message after the watermark.
CREATE OR REPLACE FUNCTION chat_unread(p_conv bigint, p_read_seq bigint, p_message_count bigint)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT GREATEST(p_message_count - COALESCE(
        (SELECT msg_no FROM message WHERE conversation_id = p_conv AND seq <= p_read_seq ORDER BY seq DESC LIMIT 1), 0), 0)
$$;

-- # chat_cursor_owing(p_delivered, p_end, p_owed_ends)
--
-- Whether a session cursor (session_cursor: delivered_seq, end_seq,
-- owed_ends) still owes entries of memberships that ended: the last of
-- their ends is past the delivered cursor. The ends ascend, end_seq first.
CREATE OR REPLACE FUNCTION chat_cursor_owing(p_delivered bigint, p_end bigint, p_owed_ends bigint[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE(GREATEST(p_end, p_owed_ends[cardinality(p_owed_ends)]) > p_delivered, false);
$$;

-- # chat_session_open(p_client, p_user, p_persistent, p_clean, p_expiry, p_token)
--
-- Opens (or resumes) an MQTT session in one round trip. A client id
-- belongs to one user: o_owner is its owner, and when that is not p_user
-- nothing changed. Otherwise the session is p_token's, the connection
-- opening it: only that connection's end deletes or touches it (migration
-- 0024). A persistent session that is not started clean, and whose
-- expiry did not run out since its last connection ended (the sweep that
-- deletes such sessions runs only every minute), resumes
-- (o_resumed) with its cursors and its recorded subscriptions
-- (o_subscriptions; NULL when none were recorded); any other session
-- starts now: cursors at every conversation's last_seq (persistent) or
-- none, subscriptions an empty record (persistent) or none. A resume drops
-- the cursors of conversations the user left (end_seq, migration 0026)
-- once the session acknowledged everything it was owed there. A new
-- persistent session forgets the user's offline persistent sessions
-- beyond the 100 most recently seen (store.MaxOfflineSessions): their
-- next connect finds no session, as after an expiry.
--
-- Taking a session over from a connection that may still be open in
-- another chatd process (a device that moved to another node) sends
-- NOTIFY chat_session_takeover, payload {"clientId","token"} with the old
-- connection's token, so that its node closes it (MQTT-3.1.4-3; on one
-- node mochi does that itself). Tokens are "<node>/<process>/<n>"
-- (hooks.Chat.newToken): the part before the last "/" names the process.
-- A connection that ended cleared its token (chat_sessions_touch), so a
-- resume after a disconnect notifies nobody. A client id too long for a
-- notification's 8,000 bytes is not announced: its old connection stays
-- open until its keepalive runs out, as before.
--
-- It commits without waiting for the WAL flush (synchronous_commit off for
-- its own transaction): reconnect storms then cost no fsync per client.
-- What a crash of PostgreSQL can lose is an open of the last moments, and
-- the next connection then reports the session honestly (not present, or
-- resumed as before that open). A SUBACK waits for a synchronous commit of
-- the subscriptions (Sessions.SaveSubscriptions), and WAL is flushed in
-- order, so a session is never present with subscriptions its client was
-- not told of, nor without ones it was.
CREATE OR REPLACE FUNCTION chat_session_open(p_client text, p_user bigint, p_persistent boolean, p_clean boolean, p_expiry bigint, p_token text,
    OUT o_owner bigint, OUT o_resumed boolean, OUT o_subscriptions jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    v_persistent boolean;
    v_subs jsonb;
    v_inserted boolean;
    v_old text; -- the token of the connection that held the session
    v_notice text;
    v_expired boolean; -- its last connection ended longer ago than its expiry
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    o_resumed := false;
    -- Expired by the sweep's measure (Sessions.Expire): its expiry ran
    -- out since it was last seen, and no live node holds a connection of
    -- it (node_id, the presence flag: cleared by the node when the
    -- connection ended, which also records it last seen then, or by
    -- whoever reaped a crashed node, recording it last seen at that
    -- node's last heartbeat). Not by its token: a disconnect whose own
    -- write (chat_sessions_touch) was lost leaves the token of a node
    -- that is alive, and the session would resume until the sweep.
    SELECT user_id, persistent, subscriptions, conn_token,
           COALESCE(last_seen_at + make_interval(secs => expiry_seconds) < now()
                    AND NOT EXISTS (
                        SELECT 1 FROM chat_node n
                        WHERE n.node_id = chat_session.node_id
                          AND n.heartbeat_at > now() - interval '5 minutes'), false)
    INTO o_owner, v_persistent, v_subs, v_old, v_expired
    FROM chat_session WHERE client_id = p_client FOR UPDATE;
    IF NOT FOUND THEN
        LOOP
            INSERT INTO chat_session (client_id, user_id, persistent, expiry_seconds, subscriptions, conn_token)
            VALUES (p_client, p_user, p_persistent, p_expiry, CASE WHEN p_persistent THEN '[]'::jsonb END, p_token)
            ON CONFLICT (client_id) DO NOTHING;
            v_inserted := FOUND;
            -- A concurrent open may have won the insert: read the owner again.
            SELECT user_id, conn_token INTO o_owner, v_old FROM chat_session WHERE client_id = p_client FOR UPDATE;
            EXIT WHEN FOUND;
            -- Its session is gone already (its connection ended, or the
            -- sweep came): the client id is free again, insert anew.
        END LOOP;
        IF o_owner <> p_user THEN
            RETURN;
        END IF;
        IF NOT v_inserted THEN
            -- That open was this user's other connection: this one takes
            -- the session over from it, as any later open does, and the
            -- session (new: nothing to resume) is as this one asks for it,
            -- persistent or not, with its expiry; the cursors follow below.
            UPDATE chat_session SET persistent = p_persistent, expiry_seconds = p_expiry, last_seen_at = now(),
                subscriptions = CASE WHEN p_persistent THEN '[]'::jsonb END, conn_token = p_token
            WHERE client_id = p_client;
        END IF;
    ELSE
        IF o_owner <> p_user THEN
            RETURN;
        END IF;
        o_resumed := p_persistent AND v_persistent AND NOT p_clean AND NOT v_expired;
        IF o_resumed THEN
            o_subscriptions := v_subs;
        END IF;
        UPDATE chat_session SET persistent = p_persistent, expiry_seconds = p_expiry, last_seen_at = now(),
            subscriptions = CASE WHEN o_resumed THEN subscriptions WHEN p_persistent THEN '[]'::jsonb END,
            conn_token = p_token
        WHERE client_id = p_client;
    END IF;
    IF v_old IS NOT NULL AND v_old <> p_token
            AND regexp_replace(v_old, '[^/]*$', '') <> regexp_replace(p_token, '[^/]*$', '') THEN
        v_notice := json_build_object('clientId', p_client, 'token', v_old)::text;
        IF octet_length(v_notice) < 8000 THEN
            PERFORM pg_notify('chat_session_takeover', v_notice);
        END IF;
    END IF;
    IF o_resumed THEN
        -- The cursors of conversations the user left whose owed entries
        -- the session acknowledged (every membership's end reached) have
        -- served.
        DELETE FROM session_cursor sc
        WHERE sc.client_id = p_client AND sc.end_seq IS NOT NULL
          AND NOT chat_cursor_owing(sc.delivered_seq, sc.end_seq, sc.owed_ends)
          AND NOT EXISTS (SELECT 1 FROM conversation_member m
                          WHERE m.conversation_id = sc.conversation_id AND m.user_id = p_user);
        RETURN;
    END IF;
    DELETE FROM session_cursor WHERE client_id = p_client;
    IF p_persistent THEN
        -- A new persistent session: the user's offline ones beyond the
        -- 100 most recently seen (store.MaxOfflineSessions) are forgotten,
        -- as if expired. Every leave of a group writes a cursor row for
        -- each persistent session of its user under the group's lock
        -- (store.oweUntilLeave), and the connection cap counts live
        -- connections only: one account connecting with a new client id
        -- a second piled up 86,400 sessions a day. Only sessions no
        -- connection holds (conn_token cleared by chat_sessions_touch),
        -- and none another statement holds (SKIP LOCKED: this never
        -- waits, holding p_client's row, for another session's lock).
        -- Those beyond are chosen unlocked, then locked: FOR UPDATE over
        -- the OFFSET would lock the 100 it skips as well, for the rest of
        -- this transaction, and a leave of the user (oweUntilLeave, under
        -- the group's lock) would wait for it. Locked, each is checked
        -- again as it is now (a connection may have taken it since).
        DELETE FROM chat_session WHERE client_id IN (
            SELECT s.client_id FROM chat_session s
            WHERE s.client_id IN (
                    SELECT o.client_id FROM chat_session o
                    WHERE o.user_id = p_user AND o.persistent AND o.conn_token IS NULL AND o.client_id <> p_client
                    ORDER BY o.last_seen_at DESC, o.client_id DESC
                    OFFSET 100)
              AND s.user_id = p_user AND s.persistent AND s.conn_token IS NULL
            FOR UPDATE SKIP LOCKED);
        -- Each of the user's conversations by key (LATERAL ... LIMIT 1):
        -- planned from an unanalyzed table's guesses, a join read every
        -- conversation of the node at every connect.
        INSERT INTO session_cursor (client_id, conversation_id, delivered_seq)
        SELECT p_client, m.conversation_id, c.last_seq
        FROM conversation_member m
        CROSS JOIN LATERAL (SELECT cv.last_seq FROM conversation cv WHERE cv.id = m.conversation_id LIMIT 1) c
        WHERE m.user_id = p_user;
    END IF;
END;
$$;

-- # chat_sessions_touch(p_ids, p_tokens, p_expiry_seconds)
--
-- Records that sessions disconnected now, with their expiry (a v5 client
-- may change it on DISCONNECT), in client id order (the order every
-- statement that updates many sessions locks them in); a session another
-- connection opened since (its conn_token is not p_tokens') is left
-- alone; a session touched here no longer has a connection (conn_token
-- NULL), so whoever resumes it takes it over from nobody. Asynchronous commit: a crash loses at most a last-seen time,
-- which only delays an expiry.
CREATE OR REPLACE FUNCTION chat_sessions_touch(p_ids text[], p_tokens text[], p_expiry_seconds bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH v AS (SELECT * FROM unnest(p_ids, p_tokens, p_expiry_seconds) AS v(id, token, secs)),
    locked AS (SELECT s.client_id FROM chat_session s JOIN v ON s.client_id = v.id
               ORDER BY s.client_id FOR NO KEY UPDATE OF s)
    UPDATE chat_session s SET last_seen_at = now(), expiry_seconds = v.secs, conn_token = NULL
    FROM v JOIN locked l ON l.client_id = v.id WHERE s.client_id = v.id AND s.conn_token = v.token;
END;
$$;

-- # chat_lock_user_devices(p_user)
--
-- Takes, until the transaction ends, the lock that serialises a user's
-- push device registrations with each other (the device cap) and with the
-- revocation of their tokens (internal/push RegisterDevice, store
-- RevokeTokens): a registration that holds it commits before the
-- revocation's DELETE reads the devices, and one that takes it after a
-- revocation reads the revocation (a fresh READ COMMITTED snapshot in its
-- next statement).
CREATE OR REPLACE FUNCTION chat_lock_user_devices(p_user bigint) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(7170630, hashtext(p_user::text));
$$;
