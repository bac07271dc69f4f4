package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// batchOutcome is one row of chat_send_batch.
type batchOutcome struct {
	status int16
	seq    *int64
	sender *int64
	body   *string
	at     *time.Time
}

type batchSend struct {
	conv, sender int64
	id, body     string
}

// callSendBatch runs chat_send_batch in a transaction of its own, the way
// group commit does.
func callSendBatch(t *testing.T, pool *pgxpool.Pool, sends []batchSend) []batchOutcome {
	t.Helper()
	ctx := testCtx(t)
	var conv, sender []int64
	var id, body []string
	for _, s := range sends {
		conv, sender, id, body = append(conv, s.conv), append(sender, s.sender), append(id, s.id), append(body, s.body)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, store.SendMessagesSQL, conv, sender, id, body)
	if err != nil {
		t.Fatal(err)
	}
	out := scanAll(t, rows, func(o *batchOutcome) []any { return []any{&o.status, &o.seq, &o.sender, &o.body, &o.at} })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(sends) {
		t.Fatalf("%d outcomes for %d sends", len(out), len(sends))
	}
	return out
}

// TestSendBatchFunctionDecidesLikeTheSequentialModel feeds random batches
// (unknown conversations, non-members, resends, other senders' clientMsgIds,
// repeats within a batch; and as many lone sends) to chat_send_batch and
// checks every outcome, and then every table, against sends applied one at
// a time in arrival order.
func TestSendBatchFunctionDecidesLikeTheSequentialModel(t *testing.T) {
	st, pool := newStore(t)
	members := map[int64]map[int64]bool{}
	var convs []int64
	for _, m := range [][]int64{{1, 2}, {2, 3}, {1, 3, 4}} {
		c := mustGroup(t, st, m[0], m[1:]...)
		convs = append(convs, c.ID)
		members[c.ID] = map[int64]bool{}
		for _, u := range m {
			members[c.ID][u] = true
		}
	}
	const missing = 999999
	type stored struct {
		seq, sender int64
		body        string
	}
	lastSeq := map[int64]int64{}
	msgs := map[int64]map[string]stored{}
	for _, c := range convs {
		msgs[c] = map[string]stored{}
	}
	readUpTo := map[[2]int64]int64{}
	var ids []string
	bodies := []string{"hi", `quote " and \ backslash`, "<b>&amp;</b>", "emoji 🎉 and ü", "line\nbreak\ttab", "ctl \x01\x1f", "sep \u2028\u2029", "x"}
	rng := rand.New(rand.NewPCG(8, 7))
	newMessages := 0
	for round := 0; round < 300; round++ {
		n := 1 // every other round a lone send: the function's own path for it
		if round%2 == 1 {
			n += rng.IntN(20)
		}
		var sends []batchSend
		for i := 0; i < n; i++ {
			s := batchSend{conv: convs[rng.IntN(len(convs))], sender: 1 + rng.Int64N(4), body: bodies[rng.IntN(len(bodies))]}
			if rng.IntN(30) == 0 {
				s.conv = missing
			}
			if len(ids) > 0 && rng.IntN(3) == 0 {
				s.id = ids[rng.IntN(len(ids))]
			} else {
				s.id = uuid.NewString()
				ids = append(ids, s.id)
			}
			sends = append(sends, s)
		}
		out := callSendBatch(t, pool, sends)
		for i, s := range sends {
			o := out[i]
			var want int16
			var w stored
			switch {
			case s.conv == missing:
				want = 4
			case !members[s.conv][s.sender]:
				want = 3
			default:
				if prev, ok := msgs[s.conv][s.id]; ok {
					want, w = 1, prev
					if prev.sender != s.sender {
						want = 2
					}
				} else {
					lastSeq[s.conv]++
					w = stored{seq: lastSeq[s.conv], sender: s.sender, body: s.body}
					msgs[s.conv][s.id] = w
					k := [2]int64{s.conv, s.sender}
					readUpTo[k] = max(readUpTo[k], w.seq)
					newMessages++
				}
			}
			if o.status != want {
				t.Fatalf("round %d send %d %+v: status %d, want %d", round, i, s, o.status, want)
			}
			switch want {
			case 0:
				if o.seq == nil || *o.seq != w.seq || o.at == nil || o.body != nil {
					t.Fatalf("round %d send %d: new message outcome %+v, want seq %d, a time and no body", round, i, o, w.seq)
				}
			case 1:
				if o.seq == nil || *o.seq != w.seq || o.sender == nil || *o.sender != w.sender || o.body == nil || *o.body != w.body || o.at == nil {
					t.Fatalf("round %d send %d: duplicate outcome %+v, want %+v", round, i, o, w)
				}
			}
		}
	}
	if newMessages < 500 {
		t.Fatalf("only %d new messages: the model test exercised too little", newMessages)
	}

	for _, c := range convs {
		if got := queryInt(t, pool, "SELECT last_seq FROM conversation WHERE id = $1", c); got != lastSeq[c] {
			t.Fatalf("conversation %d: last_seq %d, want %d", c, got, lastSeq[c])
		}
		rows, err := pool.Query(testCtx(t), `SELECT seq, sender_id, client_msg_id::text, body FROM message WHERE conversation_id = $1 ORDER BY seq`, c)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for rows.Next() {
			var seq, sender int64
			var id, body string
			if err := rows.Scan(&seq, &sender, &id, &body); err != nil {
				t.Fatal(err)
			}
			n++
			if w, ok := msgs[c][id]; !ok || seq != n || w != (stored{seq: seq, sender: sender, body: body}) {
				t.Fatalf("conversation %d row %d: seq %d sender %d id %s body %q, model %+v", c, n, seq, sender, id, body, w)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != lastSeq[c] {
			t.Fatalf("conversation %d: %d rows, want %d", c, n, lastSeq[c])
		}
		for u := range members[c] {
			if got := queryInt(t, pool, "SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = $2", c, u); got != readUpTo[[2]int64{c, u}] {
				t.Fatalf("conversation %d user %d: last_read_seq %d, want %d", c, u, got, readUpTo[[2]int64{c, u}])
			}
		}
	}

	// Every new message has exactly one outbox row, in seq order, that
	// references it (the relay encodes it with chatd's own encoder).
	rows, err := pool.Query(testCtx(t), `
		SELECT m.conversation_id, m.seq,
		       (SELECT count(*) FROM outbox o WHERE o.type = 'message.new'
		           AND o.conversation_id = m.conversation_id AND o.seq = m.seq),
		       (SELECT count(*) FROM outbox o WHERE o.type = 'message.new'
		           AND o.conversation_id = m.conversation_id AND o.seq = m.seq AND o.payload IS NULL),
		       (SELECT o.msg_key FROM outbox o WHERE o.type = 'message.new'
		           AND o.conversation_id = m.conversation_id AND o.seq = m.seq LIMIT 1)
		FROM message m ORDER BY m.conversation_id, m.seq`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		conv, seq int64
		n, bare   int64
		key       string
	}
	all := scanAll(t, rows, func(r *row) []any { return []any{&r.conv, &r.seq, &r.n, &r.bare, &r.key} })
	if len(all) != newMessages {
		t.Fatalf("%d messages, want %d", len(all), newMessages)
	}
	for _, r := range all {
		if r.n != 1 || r.bare != 1 || r.key != fmt.Sprint(r.conv) {
			t.Fatalf("message %d/%d: %d outbox rows (%d referencing it), key %q", r.conv, r.seq, r.n, r.bare, r.key)
		}
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM outbox WHERE type = 'message.new'`); got != int64(newMessages) {
		t.Fatalf("%d message.new outbox rows, want %d", got, newMessages)
	}
	// Outbox ids follow seq within a conversation.
	if bad := queryInt(t, pool, `SELECT count(*) FROM (
			SELECT seq - lag(seq) OVER (PARTITION BY msg_key ORDER BY id) AS step
			FROM outbox WHERE type = 'message.new') s WHERE step <> 1`); bad != 0 {
		t.Fatalf("%d outbox rows out of seq order", bad)
	}
}

// TestSendBatchFunctionTimesMessagesAfterTheConversationsLastOne pins a
// conversation's last message time in the future, with fractions Go writes
// differently (none, trailing zeros, all six digits): the next message
// takes exactly that time, to the microsecond, so times follow seq order
// whatever the clocks did. (relay's TestRelayedMessageTimesAreWhatGoWrites
// checks the same times as events carry them.)
func TestSendBatchFunctionTimesMessagesAfterTheConversationsLastOne(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	for i, frac := range []string{"", ".000001", ".1", ".12", ".1234", ".123456", ".999999", ".5"} {
		at := fmt.Sprintf("2031-05-06T07:08:%02d%s+00:00", 10+i, frac)
		if _, err := pool.Exec(testCtx(t), `UPDATE conversation SET last_message_at = $2::timestamptz WHERE id = $1`, c.ID, at); err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		out := callSendBatch(t, pool, []batchSend{{conv: c.ID, sender: 1, id: id, body: "pinned"}})
		if out[0].status != 0 || out[0].at == nil {
			t.Fatalf("%s: outcome %+v", at, out[0])
		}
		want, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatal(err)
		}
		var stored time.Time
		if err := pool.QueryRow(testCtx(t), `SELECT created_at FROM message WHERE client_msg_id = $1`, id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !stored.Equal(want) || !out[0].at.Equal(want) {
			t.Fatalf("%s: stored %s, answered %s", at, stored.UTC().Format(time.RFC3339Nano), out[0].at.UTC().Format(time.RFC3339Nano))
		}
		events := outboxEvents(t, pool, c.ID, chat.EventMessageNew)
		if last := events[len(events)-1]; last.Seq != *out[0].seq || last.CreatedAt == nil || !last.CreatedAt.Equal(want) {
			t.Fatalf("%s: outbox event %+v", at, last)
		}
	}
}

// Go encodes a time in the host's zone; times leave the store in UTC so
// that events read "...Z" on any host, as the outbox payloads do.
func TestTimesLeaveTheStoreInUTC(t *testing.T) {
	st, pool := newStore(t)
	c := mustGroup(t, st, 1, 2)
	if m := mustSend(t, st, c.ID, 1, "when"); m.CreatedAt.Location() != time.UTC {
		t.Fatalf("send result createdAt in %v, want UTC", m.CreatedAt.Location())
	}
	var at time.Time
	if err := pool.QueryRow(testCtx(t), `SELECT now()`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if at.Location() != time.UTC {
		t.Fatalf("scanned timestamptz in %v, want UTC", at.Location())
	}
}

// A send batch locks its senders' member rows (for their watermarks) in
// (conversation, user) order, as read batches do, whatever order its sends
// came in and whatever join the planner picks for the update: two writers
// that take the same rows in different orders deadlock, and PostgreSQL
// breaks that after a second by failing one of them.
func TestSendBatchesAndReadBatchesNeverDeadlockOverMemberRows(t *testing.T) {
	st, pool := newStore(t)
	var convs []int64
	for i := 0; i < 6; i++ {
		convs = append(convs, mustGroup(t, st, 1, 2).ID)
	}
	ctx := testCtx(t)
	stop := time.Now().Add(3 * time.Second)
	errs := make(chan error, 4)
	var sends, reads atomic.Int64
	for w := 0; w < 2; w++ {
		go func() { // send batches, conversations in descending order
			for time.Now().Before(stop) {
				var conv, sender []int64
				var id, body []string
				for i := len(convs) - 1; i >= 0; i-- {
					conv, sender = append(conv, convs[i]), append(sender, 1)
					id, body = append(id, uuid.NewString()), append(body, "x")
				}
				_, err := pool.Exec(ctx, store.SendMessagesSQL, conv, sender, id, body)
				if err != nil {
					errs <- fmt.Errorf("send batch: %w", err)
					return
				}
				sends.Add(1)
			}
			errs <- nil
		}()
		go func() { // read batches: lock in key order, hold, update
			for time.Now().Before(stop) {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs <- fmt.Errorf("read batch: %w", err)
					return
				}
				_, err = tx.Exec(ctx, `SELECT 1 FROM conversation_member WHERE conversation_id = ANY($1) AND user_id = 1
						ORDER BY conversation_id, user_id FOR UPDATE`, convs)
				if err == nil {
					_, err = tx.Exec(ctx, `SELECT pg_sleep(0.001)`)
				}
				if err == nil {
					_, err = tx.Exec(ctx, `UPDATE conversation_member SET last_read_seq = last_read_seq
						WHERE conversation_id = ANY($1) AND user_id = 1`, convs)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					_ = tx.Rollback(ctx)
					errs <- fmt.Errorf("read batch: %w", err)
					return
				}
				reads.Add(1)
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if sends.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("%d send batches, %d read batches ran", sends.Load(), reads.Load())
	}
	t.Logf("%d send batches, %d read batches", sends.Load(), reads.Load())
}

// A forward repeated within one batch (the same clientMsgId twice, as a
// client resending over a second transport at once) is answered as the
// forward it repeats: its seq, and the body the forward copied (the
// request's own body is empty), which the resend's answer carries with
// forwardedFrom.
func TestAForwardRepeatedWithinABatchAnswersTheCopiedBody(t *testing.T) {
	ctx, st, pool, g := groupOf12(t)
	other := mustGroup(t, st, 1, 2)
	src := mustSend(t, st, g.ID, 2, "the deploy key rotates on Friday")
	id := uuid.NewString()
	rows, err := pool.Query(ctx, `SELECT o_status, o_seq, o_body, o_target_sender FROM chat_send_batch(
		ARRAY['message','message'], ARRAY[$1,$1]::bigint[], ARRAY[1,1]::bigint[], ARRAY[$2,$2]::uuid[], ARRAY['','']::text[],
		ARRAY[0,0]::bigint[], ARRAY[$3,$3]::bigint[], ARRAY[$4,$4]::bigint[], ARRAY[NULL,NULL]::text[],
		ARRAY[false,false], NULL, NULL)`, other.ID, id, g.ID, src.Seq)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		status       int16
		seq          *int64
		body         *string
		targetSender *int64
	}
	out := scanAll(t, rows, func(r *row) []any { return []any{&r.status, &r.seq, &r.body, &r.targetSender} })
	if len(out) != 2 || out[0].status != 0 || out[1].status != 1 || out[0].seq == nil || out[1].seq == nil || *out[1].seq != *out[0].seq {
		t.Fatalf("outcomes %+v: want the forward new, then its repeat a duplicate of the same seq", out)
	}
	for i, o := range out {
		if o.body == nil || *o.body != src.Body || o.targetSender == nil || *o.targetSender != 2 {
			t.Errorf("outcome %d answers body %v from sender %v, want the copied %q of user 2", i, derefStr(o.body), o.targetSender, src.Body)
		}
	}
}

func derefStr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// The same clientMsgId twice within one batch (a client resending over a
// second transport at once) is judged as one after the other would be: a
// repeat with another reply or forward than the first's is a conflict,
// not a duplicate whose answer would carry a reply or forward that was
// never stored.
func TestARepeatWithinABatchWithOtherReferencesIsAConflict(t *testing.T) {
	ctx, st, pool, g := groupOf12(t)
	other := mustGroup(t, st, 1, 2)
	src := mustSend(t, st, g.ID, 2, "quoted or forwarded")
	for _, c := range []struct {
		name               string
		target, fwdC, fwdS [2]*int64
	}{
		{name: "a plain message, then a reply", target: [2]*int64{nil, &src.Seq}},
		{name: "a reply, then a plain message", target: [2]*int64{&src.Seq, nil}},
		{name: "a plain message, then a forward", fwdC: [2]*int64{nil, &g.ID}, fwdS: [2]*int64{nil, &src.Seq}},
	} {
		conv := g.ID
		if c.fwdC[1] != nil {
			conv = other.ID
		}
		target := [2]int64{}
		for i, p := range c.target {
			if p != nil {
				target[i] = *p
			}
		}
		body := [2]string{"mine", "mine"}
		for i := range body {
			if c.fwdC[i] != nil {
				body[i] = ""
			}
		}
		id := uuid.NewString()
		rows, err := pool.Query(ctx, `SELECT o_status FROM chat_send_batch(
			ARRAY['message','message'], ARRAY[$1,$1]::bigint[], ARRAY[1,1]::bigint[], ARRAY[$2,$2]::uuid[], $3::text[],
			$4::bigint[], $5::bigint[], $6::bigint[], ARRAY[NULL,NULL]::text[],
			ARRAY[false,false], NULL, NULL)`, conv, id, body[:], target[:], c.fwdC[:], c.fwdS[:])
		if err != nil {
			t.Fatal(err)
		}
		out := scanAll(t, rows, func(s *int16) []any { return []any{s} })
		if len(out) != 2 || out[0] != 0 || out[1] != 2 {
			t.Errorf("%s with one clientMsgId in one batch: outcomes %v, want [0 2] (new, then a conflict)", c.name, out)
		}
	}
}
