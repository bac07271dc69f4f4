package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// Presence stores who is connected, as state (migration 0005), never as one
// row per event:
//
//   - chat_session.node_id names the node holding the session's live
//     connection (NULL: none). A node sets and clears only its own, so a
//     client that moved to another node is never cleared by the old one.
//   - chat_node.heartbeat_at proves a node alive; connections of a node
//     whose heartbeat is older than the TTL (it crashed) do not count,
//     and the next live node to beat clears them (ReapNodes).
//     incarnation (migration 0049) is new each time the row is inserted
//     (Heartbeat).
//   - user_presence.last_seen_at is when the user was last connected;
//     announced_online (migration 0045), whether their watchers were last
//     told they are online (ClaimOnline, ClaimOffline).
//
// A user is online while any of their sessions has a live connection on a
// live node. Presence is safe for concurrent use.
type Presence struct {
	pool *pgxpool.Pool
	ttl  time.Duration

	mu sync.Mutex
	// lives holds, per node, the incarnation of its heartbeat row that
	// this store's last heartbeat of it read.
	lives map[string]string
}

// NewPresence returns the presence store; ttl is how long a node's
// heartbeat stays valid.
func NewPresence(pool *pgxpool.Pool, ttl time.Duration) *Presence {
	return &Presence{pool: pool, ttl: ttl, lives: map[string]string{}}
}

// Heartbeat records that node is alive and forgets nodes silent for a day.
// revived reports that node's row was inserted anew since the last of
// this store's heartbeats of node that got an answer: it starts, or
// another node took it for dead (ReapNodes) and cleared its connections.
// A heartbeat that inserted it and lost its answer (a timeout, a
// connection cut after the commit) leaves the telling to the next one,
// which reads the row's new incarnation: else the node would never learn
// that it was revived. A node's heartbeats go through one Presence.
func (p *Presence) Heartbeat(ctx context.Context, node string) (revived bool, err error) {
	// The row's incarnation, read in the upsert: unlike a look before
	// it, this holds when a reaper deletes the row while the upsert
	// waits for it.
	var life string
	err = p.pool.QueryRow(ctx, `
		WITH gone AS (DELETE FROM chat_node WHERE heartbeat_at < now() - interval '1 day')
		INSERT INTO chat_node (node_id, heartbeat_at) VALUES ($1, now())
		ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now()
		RETURNING incarnation::text`, node).Scan(&life)
	if err != nil {
		return false, classify("presence heartbeat", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	revived = p.lives[node] != life
	p.lives[node] = life
	return revived, nil
}

// ResetNode clears every connection flag of node: at start (left over by a
// crashed process with the same node id) and at shutdown, when remove also
// deletes its heartbeat. It records the users whose connections it cleared
// last seen now and returns them: their connections ended by now, and the
// process that held them announced nothing if it crashed.
//
// At start, which comes before the node accepts connections, the sessions
// whose connections a crashed process held are recorded as that process
// left them: last seen at its last heartbeat (their expiry ran from then,
// not from this start; now when none is left), and held by no connection
// (their tokens of this node cleared, as a disconnect clears its own), so
// that one whose expiry ran out while the node was down is not resumed
// (chat_session_open) and is swept.
func (p *Presence) ResetNode(ctx context.Context, node string, remove bool) ([]int64, error) {
	var users []int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			WITH cleared AS (
			  UPDATE chat_session s SET node_id = NULL,
			    last_seen_at = CASE WHEN $2 THEN now()
			                        ELSE GREATEST(s.last_seen_at, COALESCE((SELECT n.heartbeat_at FROM chat_node n WHERE n.node_id = $1), now())) END,
			    conn_token = CASE WHEN NOT $2 AND left(s.conn_token, length($1) + 1) = $1 || '/' THEN NULL ELSE s.conn_token END
			  WHERE s.node_id = $1 RETURNING s.user_id),
			departed AS (SELECT DISTINCT user_id FROM cleared),
			seen AS (
			  INSERT INTO user_presence (user_id, last_seen_at)
			  SELECT user_id, now() FROM departed ORDER BY user_id
			  ON CONFLICT (user_id) DO UPDATE SET last_seen_at = GREATEST(user_presence.last_seen_at, EXCLUDED.last_seen_at))
			SELECT user_id FROM departed`, node, remove)
		if err != nil {
			return fmt.Errorf("clear connections: %w", err)
		}
		if users, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return fmt.Errorf("clear connections: %w", err)
		}
		if remove {
			if _, err := tx.Exec(ctx, `DELETE FROM chat_node WHERE node_id = $1`, node); err != nil {
				return fmt.Errorf("remove node: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, classify("reset presence", err)
	}
	return users, nil
}

// SetConnections records, in one transaction, the sessions now connected to
// node (connected[i] only while its session is still tokens[i]'s, the
// connection's: a write that comes late, retried after a failure, must
// not take the session from a newer connection on another node, whose
// flag the old connection's end would then clear), the sessions no longer
// connected to it, and when the given users were last seen (users who
// lost their last connection here).
func (p *Presence) SetConnections(ctx context.Context, node string, connected, tokens, disconnected []string, seen []int64) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if len(connected)+len(disconnected) > 0 {
			// In client id order, as every statement that updates many
			// sessions locks them (sessions.go): batches of the same
			// sessions wait for each other instead of deadlocking.
			b.Queue(`SELECT 1 FROM chat_session WHERE client_id = ANY($1::text[]) OR client_id = ANY($2::text[])
				ORDER BY client_id FOR NO KEY UPDATE`, connected, disconnected)
		}
		if len(connected) > 0 {
			b.Queue(`UPDATE chat_session s SET node_id = $1 FROM unnest($2::text[], $3::text[]) AS c(id, token)
				WHERE s.client_id = c.id AND s.conn_token = c.token AND s.node_id IS DISTINCT FROM $1`, node, connected, tokens)
		}
		if len(disconnected) > 0 {
			b.Queue(`UPDATE chat_session SET node_id = NULL, last_seen_at = now() WHERE client_id = ANY($2::text[]) AND node_id = $1`, node, disconnected)
		}
		if len(seen) > 0 {
			b.Queue(`INSERT INTO user_presence (user_id, last_seen_at)
				SELECT DISTINCT u, now() FROM unnest($1::bigint[]) AS u ORDER BY 1
				ON CONFLICT (user_id) DO UPDATE SET last_seen_at = GREATEST(user_presence.last_seen_at, EXCLUDED.last_seen_at)`, seen)
		}
		if b.Len() == 0 {
			return nil
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("record connections: %w", err)
		}
		return nil
	})
	if err != nil {
		return classify("record connections", err)
	}
	return nil
}

// Reassert marks the sessions among clients whose flag is clear, or names
// a node whose heartbeat ran out, as connected to node again, each only
// while it is still tokens[i]'s (the connection's, as SetConnections): a
// node's heartbeat repairs the flags of its connections that another
// node cleared by mistake, or that a failed write left clear. It never
// takes a flag from a live node, nor a session a newer connection opened
// (a takeover: that connection's node may not have written its flag
// yet), and the connection here, which the takeover notice has not
// closed yet, must not claim it back (its end would then clear it, and
// the user would count as offline while connected there).
func (p *Presence) Reassert(ctx context.Context, node string, clients, tokens []string) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// In client id order, as every statement that updates many
		// sessions locks them (SetConnections).
		b.Queue(`SELECT 1 FROM chat_session WHERE client_id = ANY($1::text[]) ORDER BY client_id FOR NO KEY UPDATE`, clients)
		b.Queue(`UPDATE chat_session s SET node_id = $1 FROM unnest($2::text[], $3::text[]) AS c(id, token)
			WHERE s.client_id = c.id AND s.conn_token = c.token AND s.node_id IS DISTINCT FROM $1
			  AND NOT EXISTS (SELECT 1 FROM chat_node n WHERE n.node_id = s.node_id
			                  AND n.heartbeat_at > now() - make_interval(secs => $4))`, node, clients, tokens, p.ttl.Seconds())
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("reassert connections: %w", err)
		}
		return nil
	})
	if err != nil {
		return classify("record connections", err)
	}
	return nil
}

// reapNodesSQL forgets the nodes other than $1 whose heartbeat is older
// than the TTL ($2 seconds): they crashed (one that stopped cleanly
// removed its row). A node another caller is reaping is skipped.
const reapNodesSQL = `
DELETE FROM chat_node WHERE node_id IN (
  SELECT node_id FROM chat_node
  WHERE node_id <> $1 AND heartbeat_at <= now() - make_interval(secs => $2)
  ORDER BY node_id FOR UPDATE SKIP LOCKED)
RETURNING node_id, heartbeat_at`

// releaseDeadSQL clears the connection flags of the dead nodes $1, whose
// last heartbeats are $2, and records their sessions last seen then (the
// last moment the node vouched for their connections), or when they
// opened if that came after it; and their users last seen at the latest
// of their sessions. It returns those users with that time.
const releaseDeadSQL = `
WITH cleared AS (
  UPDATE chat_session s SET node_id = NULL, last_seen_at = GREATEST(s.last_seen_at, d.beat)
  FROM unnest($1::text[], $2::timestamptz[]) AS d(node, beat)
  WHERE s.node_id = d.node
  RETURNING s.user_id, s.last_seen_at),
departed AS (SELECT user_id, max(last_seen_at) AS beat FROM cleared GROUP BY user_id),
seen AS (
  INSERT INTO user_presence (user_id, last_seen_at)
  SELECT user_id, beat FROM departed ORDER BY user_id
  ON CONFLICT (user_id) DO UPDATE SET last_seen_at = GREATEST(user_presence.last_seen_at, EXCLUDED.last_seen_at))
SELECT user_id, beat FROM departed`

// ReapNodes takes over what crashed nodes left: nodes other than node
// whose heartbeat is older than the TTL lose their connection flags, their
// users are recorded last seen at the node's last heartbeat (or their
// connection's start, when it came after), and the nodes are forgotten. It returns those users with that time (they are online
// still only if connected elsewhere), for the caller to announce: nobody
// else will, the node that held their connections being gone.
func (p *Presence) ReapNodes(ctx context.Context, node string) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, reapNodesSQL, node, p.ttl.Seconds())
		if err != nil {
			return fmt.Errorf("forget dead nodes: %w", err)
		}
		var nodes []string
		var beats []time.Time
		var id string
		var beat time.Time
		if _, err := pgx.ForEachRow(rows, []any{&id, &beat}, func() error {
			nodes, beats = append(nodes, id), append(beats, beat)
			return nil
		}); err != nil {
			return fmt.Errorf("forget dead nodes: %w", err)
		}
		if len(nodes) == 0 {
			return nil
		}
		// In client id order, as every statement that updates many
		// sessions locks them (SetConnections).
		if _, err := tx.Exec(ctx, `SELECT 1 FROM chat_session WHERE node_id = ANY($1::text[]) ORDER BY client_id FOR NO KEY UPDATE`, nodes); err != nil {
			return fmt.Errorf("lock dead nodes' sessions: %w", err)
		}
		rows, err = tx.Query(ctx, releaseDeadSQL, nodes, beats)
		if err != nil {
			return fmt.Errorf("release dead nodes' sessions: %w", err)
		}
		var user int64
		if _, err := pgx.ForEachRow(rows, []any{&user, &beat}, func() error {
			out[user] = beat.UTC()
			return nil
		}); err != nil {
			return fmt.Errorf("release dead nodes' sessions: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, classify("reap dead nodes", err)
	}
	return out, nil
}

// ClaimOnline records that users' watchers are told they are online and
// returns those they were not told so already: whose watchers were last
// told they went offline, or nothing. Only those are announced online:
// a user who left another node and came back here within that node's
// grace was never announced offline. The caller records its connections
// of users first (SetConnections): a ClaimOffline that comes after this
// claim then sees them connected here. Users are locked in user id order,
// as ClaimOffline locks them.
func (p *Presence) ClaimOnline(ctx context.Context, users []int64) ([]int64, error) {
	rows, err := p.pool.Query(ctx, `
		INSERT INTO user_presence AS p (user_id, last_seen_at, announced_online)
		SELECT DISTINCT u, now(), true FROM unnest($1::bigint[]) AS u ORDER BY 1
		ON CONFLICT (user_id) DO UPDATE SET announced_online = true WHERE NOT p.announced_online
		RETURNING p.user_id`, users)
	if err != nil {
		return nil, classify("claim presence", err)
	}
	claimed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify("claim presence", err)
	}
	return claimed, nil
}

// ClaimOffline records that the users among users connected to no live
// node other than node are told they went offline, and returns those
// whose watchers were last told they are online, with when they were
// last seen (as Presence answers it; zero: never): the ones to announce
// offline. One announced offline already (by the node that reaped this
// one while their grace ran here, or by another node's grace) is not
// announced again: the announcement is once per transition. Their rows are locked first, in user id
// order, so that a ClaimOnline of another node either comes after (and
// announces them online again) or came before, with its connections
// recorded, which this claim then sees.
func (p *Presence) ClaimOffline(ctx context.Context, node string, users []int64) (map[int64]time.Time, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, classify("claim presence", fmt.Errorf("acquire connection: %w", err))
	}
	defer conn.Release()
	// One transaction in one round trip (pipelineTx): a departure costs
	// this claim on top of its connection write.
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(`SELECT 1 FROM user_presence WHERE user_id = ANY($1::bigint[]) ORDER BY user_id FOR UPDATE`, users)
	// A statement of its own: its snapshot, taken once the locks are
	// held, holds the connections a claim that held them recorded.
	b.Queue(`
		WITH gone AS (
		  SELECT DISTINCT u FROM unnest($1::bigint[]) AS u
		  WHERE NOT EXISTS (SELECT 1 FROM chat_session s JOIN chat_node n ON n.node_id = s.node_id
		                    WHERE s.user_id = u AND s.node_id <> $2 AND n.heartbeat_at > now() - make_interval(secs => $3))),
		told AS (UPDATE user_presence SET announced_online = false
		         WHERE user_id IN (SELECT u FROM gone) AND announced_online RETURNING user_id AS u)
		SELECT u, `+lastSeenSQL("u")+` FROM told`, users, node, p.ttl.Seconds())
	b.Queue("COMMIT")
	out := make(map[int64]time.Time, len(users))
	br := conn.Conn().SendBatch(ctx, b)
	err = claimOfflineResults(br, out)
	_ = br.Close()
	if err != nil {
		endOpenTx(conn.Conn())
		return nil, classify("claim presence", err)
	}
	return out, nil
}

// claimOfflineResults reads ClaimOffline's batch into out.
func claimOfflineResults(br pgx.BatchResults, out map[int64]time.Time) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock presence: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("claim presence: %w", err)
	}
	var (
		u    int64
		seen *time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&u, &seen}, func() error {
		out[u] = time.Time{}
		if seen != nil {
			out[u] = seen.UTC()
		}
		return nil
	}); err != nil {
		return fmt.Errorf("claim presence: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() != "COMMIT" {
		return errors.New("claim presence: transaction rolled back")
	}
	return nil
}

// presenceSharersSQL pairs each subject among $1 with the users who share
// a conversation of at most $2 members with them and do not hide their
// own presence (user_settings: who hides theirs sees nobody's): the
// audience of the subject's presence, before the subject's own setting
// and blocks (hidden, blocked) are applied.
var presenceSharersSQL = `
SELECT DISTINCT s.subject, s.sharer AS watcher,
       EXISTS (SELECT 1 FROM user_settings h WHERE h.user_id = s.subject AND NOT h.presence) AS hidden,
       ` + blockedBySQL("s.sharer", "s.subject") + ` AS blocked
FROM (` + smallSharersSQL("shm.user_id = ANY($1::bigint[])", "$2") + `) s
WHERE s.sharer <> s.subject
  AND NOT EXISTS (SELECT 1 FROM user_settings h WHERE h.user_id = s.sharer AND NOT h.presence)`

// Watchers returns, for each user in users, the users who share with them
// a conversation of at most maxMembers members: who sees their presence.
// A user who hides their presence has no watchers and watches nobody
// (user_settings, reciprocal), and nobody the user blocked watches them.
func (p *Presence) Watchers(ctx context.Context, users []int64, maxMembers int) (map[int64][]int64, error) {
	return p.audience(ctx, users, maxMembers, false)
}

// HiddenFrom returns, for each user in users, the users Watchers would
// list but for the user's own choice: the user hides their presence, or
// blocked them. They are who may have been told the user's presence
// before that choice and must learn that it is hidden now.
func (p *Presence) HiddenFrom(ctx context.Context, users []int64, maxMembers int) (map[int64][]int64, error) {
	return p.audience(ctx, users, maxMembers, true)
}

// watchingSQL keeps, of the pairs ($1[i] subject, $2[i] watcher), those
// where the watcher may see the subject's presence, as Watchers decides
// it (presenceSharersSQL): they share a conversation of at most $4
// members, neither hides their presence and the subject did not block
// the watcher. The conversation $3[i] is looked at first (the one whose
// join listed the pair, or one sharedVia found: two key lookups); only
// a pair that no longer shares it looks through the subject's
// memberships (sharesSmallSQL).
// Lookups per pair, not joins: planned on a table without statistics,
// a join of the pairs with the conversations' members was nested loops,
// 4 s for the 39,800 pairs of a group of 200 created at once (Watching
// decides those from the conversation's members first: viaMembers).
var watchingSQL = `
SELECT p.subject, p.watcher
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS p(subject, watcher, via)
WHERE p.subject <> p.watcher
  AND NOT EXISTS (SELECT 1 FROM user_settings h WHERE h.user_id IN (p.subject, p.watcher) AND NOT h.presence)
  AND NOT ` + blockedBySQL("p.watcher", "p.subject") + `
  AND (EXISTS (SELECT 1 FROM conversation vc
               JOIN conversation_member vs ON vs.conversation_id = vc.id AND vs.user_id = p.subject
               JOIN conversation_member vw ON vw.conversation_id = vc.id AND vw.user_id = p.watcher
               WHERE vc.id = p.via AND vc.member_count <= $4)
       OR ` + sharesSmallSQL("p.subject", "p.watcher", "$4") + `)`

// pairSharersSQL reads, of the users $2, those who share a conversation
// of at most $3 members with one of the users $1 (smallSharersSQL), each
// with the least such conversation: from $1's memberships and their
// conversations' members (index only), never from $2's (a heap fetch
// each: the fence keeps the planner from starting there).
var pairSharersSQL = `
SELECT s.subject, s.sharer, min(s.conversation_id)
FROM (` + smallSharersSQL("shm.user_id = ANY($1::bigint[])", "$3") + ` OFFSET 0) s
WHERE s.sharer = ANY($2::bigint[]) AND s.sharer <> s.subject
GROUP BY s.subject, s.sharer`

// Watching returns, of the pairs (subjects[i], watchers[i]), those where
// the watcher sees the subject's presence now (as Watchers would list
// them), by subject, in the pairs' order, where Watchers reads everyone
// who shares a conversation with each subject.
// via[i] is a conversation the pair is likely to share (the one whose
// join listed them), or 0 when none is (a removal's pairs, who shared
// none when it committed). The pairs given a conversation are first
// read from its members (viaMembers); those given none are looked for
// among the sharers of the user in most of them (sharedVia); only the
// rest are looked up one by one (watchingSQL).
func (p *Presence) Watching(ctx context.Context, subjects, watchers, via []int64, maxMembers int) (map[int64][]int64, error) {
	out := map[int64][]int64{}
	if len(subjects) == 0 {
		return out, nil
	}
	decided, err := p.viaMembers(ctx, subjects, watchers, via, maxMembers)
	if err != nil {
		return nil, classify("read presence watchers", err)
	}
	var ss, ws, vs []int64
	for i, d := range decided {
		if d == undecided {
			ss, ws, vs = append(ss, subjects[i]), append(ws, watchers[i]), append(vs, via[i])
		}
	}
	// Whether a pair is kept depends on the pair alone (via only says
	// where to look first): the rest's answers are by pair.
	kept := map[[2]int64]bool{}
	if len(ss) > 0 {
		ss, ws, vs, err = p.sharedVia(ctx, ss, ws, vs, maxMembers)
		if err != nil {
			return nil, classify("read presence watchers", err)
		}
	}
	if len(ss) > 0 {
		rows, err := p.pool.Query(ctx, watchingSQL, ss, ws, vs, maxMembers)
		if err != nil {
			return nil, classify("read presence watchers", err)
		}
		var subject, watcher int64
		if _, err := pgx.ForEachRow(rows, []any{&subject, &watcher}, func() error {
			kept[[2]int64{subject, watcher}] = true
			return nil
		}); err != nil {
			return nil, classify("read presence watchers", err)
		}
	}
	for i, s := range subjects {
		if d := decided[i]; d == watches || d == undecided && kept[[2]int64{s, watchers[i]}] {
			out[s] = append(out[s], watchers[i])
		}
	}
	return out, nil
}

// A pair's answer as viaMembers decides it.
const (
	undecided = iota
	watches
	watchesNot
)

// viaMembersSQL reads the members of the conversations $1 of at most $2
// members (a batch: each statement in its turn), those of them who hide
// their presence, and the blocks between members of one of them.
var viaMembersSQL = [...]string{
	`SELECT m.conversation_id, m.user_id FROM conversation c
	 JOIN conversation_member m ON m.conversation_id = c.id
	 WHERE c.id = ANY($1::bigint[]) AND c.member_count <= $2`,
	`SELECT DISTINCT h.user_id FROM conversation c
	 JOIN conversation_member m ON m.conversation_id = c.id
	 JOIN user_settings h ON h.user_id = m.user_id AND NOT h.presence
	 WHERE c.id = ANY($1::bigint[]) AND c.member_count <= $2`,
	`SELECT DISTINCT b.blocker_id, b.blocked_id FROM conversation c
	 JOIN conversation_member m ON m.conversation_id = c.id
	 JOIN user_block b ON b.blocker_id = m.user_id
	 JOIN conversation_member o ON o.conversation_id = c.id AND o.user_id = b.blocked_id
	 WHERE c.id = ANY($1::bigint[]) AND c.member_count <= $2`,
}

// viaMembers decides the pairs both of whose users are members of the
// conversation given them (via[i], of at most maxMembers members): they
// share it, so the watcher sees the subject unless either hides their
// presence or the subject blocked the watcher, as watchingSQL decides.
// It reads each such conversation's members, and the hiding and
// blocking among them, once, in one snapshot (a read-only repeatable
// read transaction, as watchingSQL's one statement): not three lookups
// per pair, 0.19-0.96 s by the load for the 39,800 pairs of a group of
// 200 created at once (docs/benchmarks.md, "The tracker's read of a
// join's pairs"). The others it leaves undecided.
func (p *Presence) viaMembers(ctx context.Context, subjects, watchers, via []int64, maxMembers int) ([]int8, error) {
	decided := make([]int8, len(subjects))
	var convs []int64
	seen := map[int64]bool{}
	last := int64(0) // a join's pairs all give one conversation
	for _, v := range via {
		if v != 0 && v != last && !seen[v] {
			seen[v] = true
			convs = append(convs, v)
		}
		last = v
	}
	if len(convs) == 0 {
		return decided, nil
	}
	members := map[[2]int64]bool{}
	hidden := map[int64]bool{}
	blocked := map[[2]int64]bool{} // (blocker, blocked)
	err := pgx.BeginTxFunc(ctx, p.pool, readOnly(), func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, q := range viaMembersSQL {
			b.Queue(q, convs, maxMembers)
		}
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		var x, y int64
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("read members: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, []any{&x, &y}, func() error {
			members[[2]int64{x, y}] = true
			return nil
		}); err != nil {
			return fmt.Errorf("read members: %w", err)
		}
		rows, err = br.Query()
		if err != nil {
			return fmt.Errorf("read presence settings: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, []any{&x}, func() error {
			hidden[x] = true
			return nil
		}); err != nil {
			return fmt.Errorf("read presence settings: %w", err)
		}
		rows, err = br.Query()
		if err != nil {
			return fmt.Errorf("read blocks: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, []any{&x, &y}, func() error {
			blocked[[2]int64{x, y}] = true
			return nil
		}); err != nil {
			return fmt.Errorf("read blocks: %w", err)
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	for i, v := range via {
		s, w := subjects[i], watchers[i]
		if v == 0 || s == w || !members[[2]int64{v, s}] || !members[[2]int64{v, w}] {
			continue
		}
		decided[i] = watchesNot
		if !hidden[s] && !hidden[w] && !blocked[[2]int64{s, w}] {
			decided[i] = watches
		}
	}
	return decided, nil
}

// sharedVia gives the pairs given no conversation (via[i] 0) one they
// share now, and leaves out those that share none, which watchingSQL
// would not keep: it would read, for each, every membership of its
// subject against every one of its watcher's (45-385 ms, by the load,
// for the 398 pairs of a removal from a group of 200 who each have 60
// direct conversations; 1-11 ms this way: docs/benchmarks.md, "Presence
// on a removal"). A removal's pairs all have its user on one side: each
// pair is read from the side of the user in more of them (the hub), and
// each hub's sharers among the others once (pairSharersSQL: its
// memberships' conversations' members). The others keep their via.
func (p *Presence) sharedVia(ctx context.Context, subjects, watchers, via []int64, maxMembers int) ([]int64, []int64, []int64, error) {
	type pair struct{ a, b int64 } // a < b: sharing is mutual
	degree := map[int64]int{}
	for i, v := range via {
		if v == 0 && subjects[i] != watchers[i] {
			degree[subjects[i]]++
			degree[watchers[i]]++
		}
	}
	if len(degree) == 0 {
		return subjects, watchers, via, nil
	}
	var hubs, others []int64
	isHub, isOther := map[int64]bool{}, map[int64]bool{}
	for i, v := range via {
		s, w := subjects[i], watchers[i]
		if v != 0 || s == w {
			continue
		}
		if degree[w] > degree[s] {
			s, w = w, s
		}
		if !isHub[s] {
			isHub[s] = true
			hubs = append(hubs, s)
		}
		if !isOther[w] {
			isOther[w] = true
			others = append(others, w)
		}
	}
	rows, err := p.pool.Query(ctx, pairSharersSQL, hubs, others, maxMembers)
	if err != nil {
		return nil, nil, nil, err
	}
	shared := map[pair]int64{}
	var hub, other, conv int64
	if _, err := pgx.ForEachRow(rows, []any{&hub, &other, &conv}, func() error {
		k := pair{min(hub, other), max(hub, other)}
		if c, ok := shared[k]; !ok || conv < c {
			shared[k] = conv
		}
		return nil
	}); err != nil {
		return nil, nil, nil, err
	}
	ss, ws, vs := make([]int64, 0, len(subjects)), make([]int64, 0, len(subjects)), make([]int64, 0, len(subjects))
	for i, v := range via {
		s, w := subjects[i], watchers[i]
		if v == 0 && s != w {
			c, ok := shared[pair{min(s, w), max(s, w)}]
			if !ok {
				continue
			}
			v = c
		}
		ss, ws, vs = append(ss, s), append(ws, w), append(vs, v)
	}
	return ss, ws, vs, nil
}

// audience reads presenceSharersSQL and keeps, per subject, the users who
// may see the subject's presence (hidden false) or those who may not.
func (p *Presence) audience(ctx context.Context, users []int64, maxMembers int, hidden bool) (map[int64][]int64, error) {
	rows, err := p.pool.Query(ctx, `SELECT a.subject, a.watcher FROM (`+presenceSharersSQL+`) a WHERE (a.hidden OR a.blocked) = $3`,
		users, maxMembers, hidden)
	if err != nil {
		return nil, classify("read presence watchers", err)
	}
	defer rows.Close()
	out := map[int64][]int64{}
	for rows.Next() {
		var subject, watcher int64
		if err := rows.Scan(&subject, &watcher); err != nil {
			return nil, classify("read presence watchers", err)
		}
		out[subject] = append(out[subject], watcher)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("read presence watchers", err)
	}
	return out, nil
}

// lastSeenSQL is when user u was last seen connected: the latest of their
// disconnects (user_presence) and of their sessions' ends; NULL: never.
// The presence query and the offline events (ClaimOffline) both answer
// it.
func lastSeenSQL(u string) string {
	return `GREATEST((SELECT last_seen_at FROM user_presence WHERE user_id = ` + u + `),
		(SELECT max(last_seen_at) FROM chat_session WHERE user_id = ` + u + ` AND node_id IS NULL))`
}

// Presence reads one user's state (Presences).
func (p *Presence) Presence(ctx context.Context, userID int64) (chat.Presence, error) {
	ps, err := p.Presences(ctx, []int64{userID})
	if err != nil {
		return chat.Presence{}, err
	}
	return ps[0], nil
}

// Presences reads the state of each of users, in their order: online when
// any session of theirs is connected to a live node; last seen now while
// online, else the latest of their disconnects.
func (p *Presence) Presences(ctx context.Context, users []int64) ([]chat.Presence, error) {
	return p.presences(ctx, users, false)
}

// Announced is Presences as the users' watchers were told it: online also
// while a user's watchers were last told they are online and no offline
// followed (user_presence.announced_online): during the grace after a
// disconnect (a reconnect within it announces nothing), or until a live
// node reaps a crashed one. A watcher who starts sharing a conversation
// with them is given this, so that it agrees with what the others were
// told and with what comes next: an offline announced when the grace
// runs out reaches it too, and a reconnect within the grace, announced to
// nobody, leaves nothing to correct.
func (p *Presence) Announced(ctx context.Context, users []int64) ([]chat.Presence, error) {
	return p.presences(ctx, users, true)
}

func (p *Presence) presences(ctx context.Context, users []int64, announced bool) ([]chat.Presence, error) {
	rows, err := p.pool.Query(ctx, `
		SELECT EXISTS (SELECT 1 FROM chat_session s JOIN chat_node n ON n.node_id = s.node_id
		               WHERE s.user_id = u.id AND n.heartbeat_at > now() - make_interval(secs => $2))
		       OR ($3 AND EXISTS (SELECT 1 FROM user_presence a WHERE a.user_id = u.id AND a.announced_online)),
		       now(), `+lastSeenSQL("u.id")+`
		FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, ord)
		ORDER BY u.ord`,
		users, p.ttl.Seconds(), announced)
	if err != nil {
		return nil, classify("read presence", err)
	}
	out := make([]chat.Presence, 0, len(users))
	var (
		online bool
		now    time.Time
		seen   *time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&online, &now, &seen}, func() error {
		res := chat.Presence{UserID: users[len(out)], Online: online, LastSeen: seen}
		if online {
			at := now
			res.LastSeen = &at
		}
		if res.LastSeen != nil {
			at := res.LastSeen.UTC()
			res.LastSeen = &at
		}
		out = append(out, res)
		return nil
	}); err != nil {
		return nil, classify("read presence", err)
	}
	return out, nil
}

// SharesConversation reports whether a and b are members of one
// conversation (a == b: whether a is a member of any).
func (p *Presence) SharesConversation(ctx context.Context, a, b int64) (bool, error) {
	var ok bool
	err := p.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM conversation_member x JOIN conversation_member y
		               ON y.conversation_id = x.conversation_id
		               WHERE x.user_id = $1 AND y.user_id = $2)`, a, b).Scan(&ok)
	if err != nil {
		return false, classify("read membership", err)
	}
	return ok, nil
}
