package push

import (
	"context"
	"fmt"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgerr"
	"github.com/chatd/chatd/internal/retry"
	"github.com/jackc/pgx/v5"
)

// Decisions per transaction, and messages decided per conversation in one.
const (
	decideBatch   = 500
	decidePerConv = 1000
)

// ensureCursors gives conversations created since the migration a cursor
// at 0 (all their messages are new); existing rows are left alone. Its
// unique check waits for a concurrent decision that holds the row, so a
// second decider's statement starts after the first committed.
const ensureCursors = `
INSERT INTO push_cursor (conversation_id, seq)
SELECT id, 0 FROM unnest($1::bigint[]) AS id
ON CONFLICT (conversation_id) DO NOTHING`

// passOverSQL passes over the conversations of $1 none of whose members
// has a device, nor anyone with a device a job of (a former member's
// notification, which a recall still takes away): they cannot push, so
// each one's cursor moves to its last seq at once, under its row lock,
// and its entries are not read. It
// answers the others, still locked, for decideSQL. A device registered
// meanwhile gets pushes from the next message on.
//
// It is a statement of its own because decideSQL is large: PostgreSQL
// plans it at each call (chatd's connections plan every statement with
// its arguments, see pgembed.OpenPool), 4.3 ms a time, which at 4,000
// direct messages a second without devices was 60 µs of PostgreSQL's CPU
// per message, a third of all it spent (pg_stat_statements with
// track_planning, docs/benchmarks.md "Message lifecycle"). The
// conversations of web-only and device-less deployments, and of the
// bench, never reach it.
const passOverSQL = `
WITH cur AS (
    SELECT conversation_id FROM push_cursor
    WHERE conversation_id = ANY($1::bigint[])
    ORDER BY conversation_id FOR UPDATE
), lone AS MATERIALIZED (
    SELECT cur.conversation_id FROM cur
    WHERE NOT EXISTS (SELECT 1 FROM conversation_member cm JOIN push_device d ON d.user_id = cm.user_id
                      WHERE cm.conversation_id = cur.conversation_id)
      AND NOT EXISTS (SELECT 1 FROM push_job j JOIN push_device d ON d.user_id = j.user_id
                      WHERE j.conversation_id = cur.conversation_id)
), skip AS (
    UPDATE push_cursor p SET seq = c.last_seq
    FROM lone JOIN conversation c ON c.id = lone.conversation_id
    WHERE p.conversation_id = lone.conversation_id AND p.seq < c.last_seq
)
SELECT COALESCE(array_agg(conversation_id ORDER BY conversation_id), '{}')
FROM cur WHERE conversation_id NOT IN (SELECT conversation_id FROM lone)`

// wakesSQL is whether message m may wake member w.user_id's devices as
// far as they chose: they have not blocked its sender (unblockedSQL), and
// have not muted conversation c (member_settings s), or the mute is over,
// or it is a group whose message mentions them while mentions is on. The
// decision asks it, and the claim again (a block or a mute since the
// decision silences a push still waiting).
const wakesSQL = unblockedSQL + `
      AND (s.muted IS NOT TRUE
           OR (s.muted_until IS NOT NULL AND s.muted_until <= now())
           OR (c.type = 'GROUP' AND s.mentions AND ` + mentionsSQL + `))`

// mentionsSQL is whether message m's text mentions member w.user_id:
// "@<user id>" after anything but an ASCII letter, digit or underscore,
// and before anything but a digit (docs/http.md). The classes are spelled
// out in ASCII: [:alnum:] follows the database's locale (é is one under
// en_US.UTF-8, not under C), and the web client, which notifies while its
// page is hidden as chatd would push, must read the same mentions.
const mentionsSQL = `m.body ~ ('(^|[^A-Za-z0-9_])@' || w.user_id::text || '([^0-9]|$)')`

// unblockedSQL is whether member w.user_id has not blocked message m's
// sender: wakesSQL's first half, which the claim also asks alone to tell
// a push silenced by a block from one silenced by a mute.
const unblockedSQL = `NOT EXISTS (SELECT 1 FROM user_block b WHERE b.blocker_id = w.user_id AND b.blocked_id = m.sender_id)`

// decideSQL decides the conversations $1 in one statement:
//
//   - under each conversation's push_cursor row lock (a second decider, a
//     leader that lost its lease without knowing, waits and then sees the
//     cursor moved), it reads the undecided entries (after the cursor, at
//     most $5); messages older than Delay ($2 s) are due: their recipients
//     had their chance to acknowledge; other entries are due at once;
//   - only messages push (edits, recalls, reactions and system entries
//     are entries of the stream too, decided and passed over), a recalled
//     one never; a message would push a member who is not its sender, joined before
//     it, has neither acknowledged (delivered watermark) nor read it, nor
//     had it in an earlier push (push_last.seq), has a device, has not
//     blocked its sender (user_block: the blocked user may still write in
//     a group both are in, and the message still reaches the blocker's
//     sessions, but it never wakes the blocker's devices), and has not
//     muted the conversation (in a group, a mention "@<user id>" still
//     pushes while mentions is on); messages older than MaxAge ($3 s) are
//     passed over, never pushed;
//   - a member with such a due message gets one job for every such message
//     so far, young ones included: they are waiting together (coalescing).
//     It is merged into the job already waiting for that (user,
//     conversation), due at once or MinInterval ($4 s) after that pair's
//     last push; the job's covered lists its messages and push_last.seq
//     records the highest;
//   - the cursor moves past the due entries, in the same transaction as
//     the jobs: each message is decided once.
//
// Conversations none of whose members has a device were passed over by
// passOverSQL before it: decideSQL gets the others only.
//
// It answers per conversation how many entries it read, when a message
// that is not yet due remains, in how many seconds it is, the targets
// and actors of the recalls it read (also those the cursor does not pass
// yet, behind a young message: recallSQL is idempotent) and the targets
// of the edits the cursor passes (updateSQL).
const decideSQL = `
WITH cur AS (
    SELECT conversation_id, seq FROM push_cursor
    WHERE conversation_id = ANY($1::bigint[])
    ORDER BY conversation_id FOR UPDATE
), msgs AS (
    SELECT m.conversation_id, m.seq, m.sender_id, m.body, m.created_at, m.kind, m.recalled_at, m.target_seq,
           m.kind <> 'message' OR m.created_at <= now() - make_interval(secs => $2) AS due
    FROM cur CROSS JOIN LATERAL (
        SELECT conversation_id, seq, sender_id, body, created_at, kind, recalled_at, target_seq FROM message
        WHERE conversation_id = cur.conversation_id AND seq > cur.seq
        ORDER BY seq LIMIT $5
    ) m
), firstyoung AS (
    SELECT conversation_id, min(seq) AS seq, min(created_at) AS at FROM msgs WHERE NOT due GROUP BY conversation_id
), adv AS (
    UPDATE push_cursor p SET seq = r.seq
    FROM (SELECT m.conversation_id, max(m.seq) AS seq FROM msgs m
          LEFT JOIN firstyoung y USING (conversation_id)
          WHERE y.seq IS NULL OR m.seq < y.seq
          GROUP BY m.conversation_id) r
    WHERE p.conversation_id = r.conversation_id
    RETURNING p.conversation_id
), elig AS (
    SELECT w.user_id, m.conversation_id, m.seq, m.sender_id,
           m.due AND (y.seq IS NULL OR m.seq < y.seq) AS due
    FROM msgs m
    LEFT JOIN firstyoung y ON y.conversation_id = m.conversation_id
    JOIN conversation c ON c.id = m.conversation_id
    JOIN member_watermark w ON w.conversation_id = m.conversation_id
    LEFT JOIN member_settings s ON s.conversation_id = w.conversation_id AND s.user_id = w.user_id
    LEFT JOIN push_last l ON l.user_id = w.user_id AND l.conversation_id = w.conversation_id
    WHERE m.kind = 'message' AND m.recalled_at IS NULL
      AND w.user_id <> m.sender_id
      AND w.join_seq < m.seq
      AND GREATEST(w.last_delivered_seq, w.last_read_seq, COALESCE(l.seq, 0)) < m.seq
      AND m.created_at > now() - make_interval(secs => $3)
      AND EXISTS (SELECT 1 FROM push_device d WHERE d.user_id = w.user_id)
      AND ` + wakesSQL + `
), rcpt AS (
    SELECT user_id, conversation_id, count(*)::int AS n, max(seq) AS seq,
           (array_agg(sender_id ORDER BY seq DESC))[1] AS sender_id,
           range_agg(int8range(seq, seq + 1)) AS covered
    FROM elig
    GROUP BY user_id, conversation_id
    HAVING bool_or(due)
), covered AS (
    INSERT INTO push_last AS l (user_id, conversation_id, pushed_at, seq)
    SELECT user_id, conversation_id, '-infinity', seq FROM rcpt
    ON CONFLICT (user_id, conversation_id) DO UPDATE SET seq = GREATEST(l.seq, EXCLUDED.seq)
), ins AS (
    INSERT INTO push_job AS j (user_id, conversation_id, kind, seq, count, sender_id, covered, not_before)
    SELECT rc.user_id, rc.conversation_id, 'message', rc.seq, rc.n, rc.sender_id, rc.covered,
           GREATEST(now(), COALESCE(l.pushed_at + make_interval(secs => $4), now()))
    FROM rcpt rc
    LEFT JOIN push_last l ON l.user_id = rc.user_id AND l.conversation_id = rc.conversation_id
    ON CONFLICT (user_id, conversation_id, kind) WHERE state = 'pending'
    DO UPDATE SET seq = GREATEST(j.seq, EXCLUDED.seq), count = j.count + EXCLUDED.count,
                  sender_id = EXCLUDED.sender_id, covered = j.covered + EXCLUDED.covered
    RETURNING 1
), per AS (
    SELECT m.conversation_id, count(*)::int AS n,
           array_agg(m.target_seq ORDER BY m.seq) FILTER (WHERE m.kind = 'recall') AS recalled,
           array_agg(m.sender_id ORDER BY m.seq) FILTER (WHERE m.kind = 'recall') AS actors,
           -- edits the cursor passes (updateSQL is not idempotent: each
           -- is read once, in the transaction that moves the cursor past it)
           array_agg(DISTINCT m.target_seq) FILTER (WHERE m.kind = 'edit' AND (y.seq IS NULL OR m.seq < y.seq)) AS edited
    FROM msgs m LEFT JOIN firstyoung y USING (conversation_id) GROUP BY m.conversation_id
)
SELECT cur.conversation_id, COALESCE(per.n, 0),
       EXTRACT(EPOCH FROM (y.at + make_interval(secs => $2) - now()))::float8,
       (SELECT count(*) FROM ins)::int,
       (SELECT count(*) FROM adv)::int,
       COALESCE(per.recalled, '{}'), COALESCE(per.actors, '{}'), COALESCE(per.edited, '{}')
FROM cur
LEFT JOIN per ON per.conversation_id = cur.conversation_id
LEFT JOIN firstyoung y ON y.conversation_id = cur.conversation_id`

// dropRecalledSQL deletes the pending notifications that covered nothing
// but the recalled messages (conversation $1[i], seq $2[i]): nothing was
// shown, nothing is left to show. A job a sender claimed meanwhile is
// 'sending' by the time this statement locks it and is left to recallSQL.
const dropRecalledSQL = `
WITH rec AS (
    SELECT conversation_id, range_agg(int8range(seq, seq + 1)) AS t
    FROM unnest($1::bigint[], $2::bigint[]) AS x(conversation_id, seq)
    GROUP BY conversation_id
)
DELETE FROM push_job j USING rec r
WHERE j.conversation_id = r.conversation_id AND j.kind = 'message' AND j.state = 'pending'
  AND j.covered && r.t AND isempty(j.covered - r.t)`

// lockNotificationsSQL is a CTE, "locked", of the notifications (message
// jobs) of the conversations $1, locked, as each is when locked: one a
// sender claimed, or took over (claimSQL), after the statement's snapshot
// is seen as the claim left it. Newest first, as a claim locks the
// notification it claims and then those it takes over, so that the two
// wait for each other without a deadlock.
const lockNotificationsSQL = `locked AS MATERIALIZED (
    SELECT n.id, n.user_id, n.conversation_id, n.seq, n.sender_id, n.state, n.covered
    FROM push_job n WHERE n.kind = 'message' AND n.conversation_id = ANY($1::bigint[])
    ORDER BY n.id DESC FOR UPDATE OF n
)`

// recallSQL takes the recalled messages ($1[i], $2[i], recalled by
// $3[i]) out of every notification that covered them: a waiting or
// retried push then counts and previews only what is left (the newest
// remaining message). Where the notification had been claimed (it may be
// on a device: 'sending' or 'sent') and is the newest claimed one of its
// (user, conversation) (a newer one replaced it on the devices), the user
// gets a remove job, due at once and merged into one waiting already:
// its covered lists the recalled messages that notification stood for
// (all of them, when several recalls wait together), its seq the newest
// recalled message of the conversation. Where that newest claimed one is
// in flight ('sending'), what the claimed one before it (the devices'
// notification until the claim reaches one) lost is kept with it
// (recalled_older): should the claim reach no device, those messages
// are removed then (sender.go).
// It reads the notifications as it locks them (lockNotificationsSQL), not
// as the statement's snapshot had them: a claim that took one over
// meanwhile is seen, so the remove follows the notification the devices
// show, for what it stands for. Once a message is out of every covered,
// running this again changes nothing, so recalls are handled as soon as
// the decider reads them, also before the cursor passes them.
const recallSQL = `
WITH rec AS (
    SELECT conversation_id, range_agg(int8range(seq, seq + 1)) AS t,
           (array_agg(actor ORDER BY seq DESC))[1] AS actor, max(seq) AS seq
    FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS x(conversation_id, seq, actor)
    GROUP BY conversation_id
), ` + lockNotificationsSQL + `, upd AS (
    UPDATE push_job j SET
        covered = j.covered - r.t,
        count = CASE WHEN k.covered && r.t
                     THEN GREATEST(j.count - (SELECT COALESCE(sum(upper(x) - lower(x)), 0) FROM unnest(j.covered * r.t) x)::int, 1)
                     ELSE j.count END,
        seq = CASE WHEN NOT (k.covered && r.t) OR isempty(j.covered - r.t) THEN j.seq ELSE upper(j.covered - r.t) - 1 END,
        sender_id = CASE WHEN k.covered && r.t
                         THEN COALESCE((SELECT m.sender_id FROM message m
                                        WHERE m.conversation_id = j.conversation_id AND m.seq = upper(j.covered - r.t) - 1), j.sender_id)
                         ELSE j.sender_id END,
        recalled_older = j.recalled_older + COALESCE(o.t, '{}')
    FROM locked k JOIN rec r USING (conversation_id)
    LEFT JOIN LATERAL (
        -- A claim in flight (the pair's newest claimed notification) may
        -- reach no device: then the devices show the claimed one before
        -- it, which gets no remove now; what it loses is kept with the
        -- claim, and removed when the claim reaches none (sender.go).
        SELECT b.covered * r.t AS t FROM locked b
        WHERE k.state = 'sending' AND b.user_id = k.user_id AND b.conversation_id = k.conversation_id
          AND b.state <> 'pending' AND b.id < k.id
          AND NOT EXISTS (SELECT 1 FROM locked n
                          WHERE n.conversation_id = k.conversation_id AND n.user_id = k.user_id
                            AND n.state <> 'pending' AND n.id > k.id)
        ORDER BY b.id DESC LIMIT 1
    ) o ON true
    WHERE j.id = k.id AND (k.covered && r.t OR NOT COALESCE(isempty(o.t), true))
    -- what each notification loses, as it was locked
    RETURNING j.id, j.user_id, j.conversation_id, k.state, k.covered * r.t AS t
), rm AS (
    SELECT u.user_id, u.conversation_id, r.seq, r.actor, count(*)::int AS n, range_agg(u.t) AS covered
    FROM upd u JOIN rec r USING (conversation_id)
    WHERE u.state <> 'pending' AND NOT isempty(u.t)
      AND NOT EXISTS (SELECT 1 FROM locked n
                      WHERE n.conversation_id = u.conversation_id AND n.user_id = u.user_id
                        AND n.state <> 'pending' AND n.id > u.id)
    GROUP BY u.user_id, u.conversation_id, r.seq, r.actor
)
INSERT INTO push_job AS j (user_id, conversation_id, kind, seq, count, sender_id, covered)
SELECT user_id, conversation_id, 'remove', seq, n, actor, covered FROM rm
ON CONFLICT (user_id, conversation_id, kind) WHERE state = 'pending'
DO UPDATE SET seq = GREATEST(j.seq, EXCLUDED.seq), count = j.count + EXCLUDED.count, sender_id = EXCLUDED.sender_id,
              covered = j.covered + EXCLUDED.covered`

// updateSQL follows edits of the messages ($1[i], $2[i]) with a silent
// update where a notification previews one (Preview): the (user,
// conversation)'s newest claimed notification ('sending' or 'sent': it
// may be on a device; a newer one replaced it there) whose message, the
// newest it covers, is the edited one. A waiting notification needs
// none: it reads the text when it is sent. The update is due at once and
// merged into one waiting already; it reads the message's text when it
// is sent, and is sent only while that notification is still the pair's
// newest claimed one showing it (readJobSQL). The pair's notifications
// are read as they are locked (lockNotificationsSQL): one a sender
// claimed (reading the old text) after the snapshot is found claimed.
// Where that newest claimed one is in flight ('sending'), the claimed one
// before it is the devices' notification until the claim reaches one:
// an edit of the message it previews is kept with the claim
// (edited_older), and the update owed when the claim reaches none
// (unsentOwedSQL), as recallSQL keeps recalled_older.
const updateSQL = `
WITH ed AS (
    SELECT DISTINCT conversation_id, seq FROM unnest($1::bigint[], $2::bigint[]) AS x(conversation_id, seq)
), ` + lockNotificationsSQL + `, shown AS (
    SELECT DISTINCT ON (user_id, conversation_id) * FROM locked
    WHERE state <> 'pending' ORDER BY user_id, conversation_id, id DESC
), older AS (
    UPDATE push_job j SET edited_older = b.seq
    FROM shown s
    CROSS JOIN LATERAL (
        SELECT b.seq, b.covered FROM locked b
        WHERE b.user_id = s.user_id AND b.conversation_id = s.conversation_id
          AND b.state <> 'pending' AND b.id < s.id
        ORDER BY b.id DESC LIMIT 1
    ) b
    JOIN ed ON ed.conversation_id = s.conversation_id AND ed.seq = b.seq
    WHERE j.id = s.id AND s.state = 'sending' AND b.covered @> b.seq
)
INSERT INTO push_job AS j (user_id, conversation_id, kind, seq, count, sender_id, covered)
SELECT s.user_id, s.conversation_id, 'update', s.seq, 1, s.sender_id, int8multirange(int8range(s.seq, s.seq + 1))
FROM shown s JOIN ed ON ed.conversation_id = s.conversation_id AND ed.seq = s.seq
WHERE s.covered @> s.seq
ON CONFLICT (user_id, conversation_id, kind) WHERE state = 'pending'
DO UPDATE SET seq = EXCLUDED.seq, sender_id = EXCLUDED.sender_id, covered = EXCLUDED.covered`

// reconcileSQL finds every conversation with messages the decider has not
// decided: on taking the lease (the hints went with the last leader) and
// every ReconcileInterval (a hint lost with a Kafka event).
const reconcileSQL = `
SELECT c.id FROM conversation c
LEFT JOIN push_cursor p ON p.conversation_id = c.id
WHERE c.last_seq > COALESCE(p.seq, 0)`

// decide runs the decider's lease loop until ctx is done.
func (p *Pusher) decide(ctx context.Context) {
	fails := 0
	standing := false
	for ctx.Err() == nil {
		conn, err := p.connect(ctx)
		if err == nil {
			var got bool
			if err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", p.cfg.LockKey).Scan(&got); err == nil {
				fails = 0
				if got {
					standing = false
					p.log.Info("push: took the decider lease")
					p.setLeading(true)
					err = p.lead(ctx, conn)
					p.setLeading(false)
				} else if !standing {
					p.log.Info("push: standing by, another node decides pushes")
					standing = true
				}
			}
			closeConn(conn)
		}
		if ctx.Err() != nil {
			return
		}
		pause := p.cfg.LeaseInterval
		if err != nil {
			fails++
			p.m.errors.WithLabelValues("db").Inc()
			if fails == 1 {
				p.log.Warn("push: decider failed, retrying", "err", err)
			}
			pause = retry.Backoff(fails, p.cfg.LeaseInterval, 30*time.Second)
		}
		retry.Sleep(ctx, pause)
	}
}

func (p *Pusher) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := p.cfg.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "chatd-push"
	// A vanished leader's session, and so its lease, ends within ~25 s.
	pgembed.EndIfClientVanishes(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect push decider session: %w", err)
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// lead decides while the lease is held; it returns nil when ctx is done and
// the error that ended the session otherwise.
func (p *Pusher) lead(ctx context.Context, conn *pgx.Conn) error {
	t := time.NewTicker(p.cfg.Tick)
	defer t.Stop()
	var (
		nextReconcile time.Time
		dl            deviceless
	)
	for {
		now := time.Now()
		if !now.Before(nextReconcile) {
			if err := p.reconcile(ctx, conn); err != nil {
				return err
			}
			nextReconcile = now.Add(p.cfg.ReconcileInterval)
		}
		hold, err := p.holdDeviceless(ctx, conn, &dl, now)
		if err != nil {
			return err
		}
		// Once a tick, in batches while they are full: conversations that
		// fall due during a decision wait for the next tick, so a steady
		// trickle of hints is decided a tick's worth at a time, not a
		// statement per few conversations.
		for !hold {
			ids := p.due(time.Now(), decideBatch)
			if len(ids) == 0 {
				break
			}
			dl.passed = now
			if err := p.decideBatch(ctx, conn, ids); err != nil {
				for _, id := range ids {
					p.hint(id, time.Now())
				}
				return err
			}
			if len(ids) < decideBatch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// devicelessPass is how often the decider decides while no device is
// registered at all. Every decision then only passes its conversations
// over (passOverSQL: their cursors move to last_seq), so waiting changes
// no push; and one transaction a second for every conversation that fell
// due, instead of one a tick for a tick's worth, is what the send path
// shares the WAL's flushes with on a deployment without push (the bench:
// 9 write transactions a second at 1,000 direct messages a second, each
// reading the conversation and cursor tables).
const devicelessPass = time.Second

// deviceless is what the decider knows of whether any device exists.
type deviceless struct {
	none    bool      // push_device was empty when last looked at
	checked time.Time // when it was looked at
	passed  time.Time // when the last decision began
}

// holdDeviceless reports whether the conversations due now wait for a later
// tick: no device is registered anywhere and the last decision is younger
// than devicelessPass. While none is, it looks again at every tick that has
// something due (a read, no write), so a device registered on any node is
// seen within a tick and the conversations are decided as before; while
// some are, it looks again once a ReconcileInterval (they may all be
// deleted), and holds nothing back meanwhile.
func (p *Pusher) holdDeviceless(ctx context.Context, conn *pgx.Conn, dl *deviceless, now time.Time) (bool, error) {
	if now.Sub(dl.passed) >= devicelessPass || !p.anyDue(now) {
		return false, nil
	}
	if !dl.none && !dl.checked.IsZero() && now.Sub(dl.checked) < p.cfg.ReconcileInterval {
		return false, nil
	}
	var some bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM push_device)`).Scan(&some); err != nil {
		return false, fmt.Errorf("look for push devices: %w", err)
	}
	dl.none, dl.checked = !some, now
	return dl.none, nil
}

func (p *Pusher) reconcile(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, reconcileSQL)
	if err != nil {
		return fmt.Errorf("find undecided conversations: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("find undecided conversations: %w", err)
	}
	now := time.Now()
	for _, id := range ids {
		p.hint(id, now)
	}
	return nil
}

// decided is what decideSQL answered for one conversation.
type decided struct {
	id      int64
	n       int
	youngIn *float64
}

// decision is what one decision wrote: the jobs it wrote or merged, and
// the silent ones (removes, updates).
type decision struct {
	jobs, removes, updates int
}

// decideTx runs one decision in tx and returns its rows and what it
// wrote; xid gets tx's id (inTx).
func (p *Pusher) decideTx(ctx context.Context, tx pgx.Tx, ids []int64, xid *string) ([]decided, decision, error) {
	var d decision
	b := &pgx.Batch{}
	b.Queue(ensureCursors, ids)
	b.Queue(xactIDSQL).QueryRow(func(row pgx.Row) error { return row.Scan(xid) })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, d, err
	}
	if err := tx.QueryRow(ctx, passOverSQL, ids).Scan(&ids); err != nil {
		return nil, d, fmt.Errorf("pass over conversations without devices: %w", err)
	}
	if len(ids) == 0 {
		return nil, d, nil
	}
	rows, err := tx.Query(ctx, decideSQL, ids, p.cfg.Delay.Seconds(), p.cfg.MaxAge.Seconds(),
		p.cfg.MinInterval.Seconds(), decidePerConv)
	if err != nil {
		return nil, d, err
	}
	var (
		out                    []decided
		advd                   int
		recConv, recSeq, actor []int64
		edConv, edSeq          []int64
	)
	for rows.Next() {
		var (
			r                      decided
			targets, actrs, edited []int64
		)
		if err := rows.Scan(&r.id, &r.n, &r.youngIn, &d.jobs, &advd, &targets, &actrs, &edited); err != nil {
			rows.Close()
			return nil, d, err
		}
		out = append(out, r)
		for i := range targets {
			recConv, recSeq, actor = append(recConv, r.id), append(recSeq, targets[i]), append(actor, actrs[i])
		}
		for _, s := range edited {
			edConv, edSeq = append(edConv, r.id), append(edSeq, s)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, d, err
	}
	// After decideSQL, in the same transaction: its merges are seen, and
	// the cursor rows it locked keep other deciders out.
	if len(recConv) > 0 {
		if _, err := tx.Exec(ctx, dropRecalledSQL, recConv, recSeq); err != nil {
			return nil, d, fmt.Errorf("drop recalled pushes: %w", err)
		}
		tag, err := tx.Exec(ctx, recallSQL, recConv, recSeq, actor)
		if err != nil {
			return nil, d, fmt.Errorf("remove recalled pushes: %w", err)
		}
		d.removes = int(tag.RowsAffected())
	}
	// Without previews no notification shows a text an edit could change.
	if len(edConv) > 0 && p.cfg.Preview {
		tag, err := tx.Exec(ctx, updateSQL, edConv, edSeq)
		if err != nil {
			return nil, d, fmt.Errorf("update edited pushes: %w", err)
		}
		d.updates = int(tag.RowsAffected())
	}
	return out, d, nil
}

// decideBatch decides conversations ids in one transaction and hints again
// those that still have messages to decide.
func (p *Pusher) decideBatch(ctx context.Context, conn *pgx.Conn, ids []int64) error {
	start := time.Now()
	var (
		out []decided
		d   decision
	)
	// A deadlock with a result writer or a claim, which lock the
	// notifications in orders of their own, rolls the decision back
	// whole: it is made again after a pause of milliseconds, not after
	// the lease is dropped.
	// Counted once committed: also when the COMMIT's answer was lost
	// (inTx asks what became of it).
	err := pgerr.RetryConflicts(ctx, func() error {
		return inTx(ctx, conn, p.cfg.Pool, func(tx pgx.Tx, xid *string) (err error) {
			out, d, err = p.decideTx(ctx, tx, ids, xid)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("decide pushes: %w", err)
	}
	p.m.decideSeconds.Observe(time.Since(start).Seconds())
	now := time.Now()
	for _, r := range out {
		switch {
		case r.youngIn != nil:
			p.hint(r.id, now.Add(time.Duration(max(*r.youngIn, 0)*float64(time.Second))))
		case r.n == decidePerConv:
			p.hint(r.id, now)
		}
	}
	p.m.removes.Add(float64(d.removes))
	p.m.updates.Add(float64(d.updates))
	if d.jobs > 0 || d.removes > 0 || d.updates > 0 {
		p.m.decided.Add(float64(d.jobs))
		p.wake()
	}
	return nil
}
