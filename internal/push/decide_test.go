package push_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/webpushtest"
)

func TestUnacknowledgedMessageIsPushedToTheRecipientOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(nil)
	conv := r.direct(1, 2)
	r.subscribe(1, "alice")
	r.subscribe(2, "bob")
	start := time.Now()
	seq := r.send(conv, 1, "hello")
	got := r.waitPushes("bob", 1, 3*time.Second)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("pushed after %v, before the delay", d)
	}
	n := got[0]
	if n.UserID != 2 || n.ConversationID != conv || n.Seq != seq || n.SenderID != 1 || n.Count != 1 || n.Badge != 1 || n.Title != "New message" || n.Body != "" {
		t.Errorf("notification = %+v", n)
	}
	r.quiet("bob", 1, 500*time.Millisecond)
	r.quiet("alice", 0, 0)
}

func TestAcknowledgedMessageIsNotPushed(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, nil)
	seq := r.send(conv, 1, "hello")
	r.ack(conv, 2, seq)
	r.quiet("bob", 0, time.Second)
	if n := r.count(`SELECT seq FROM push_cursor WHERE conversation_id = $1`, conv); n != seq {
		t.Errorf("cursor at %d, want %d: the message was decided", n, seq)
	}
}

func TestBurstCoalescesIntoOnePushAndTheMinimumIntervalCarriesTheCount(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// A delay long enough that the burst's sends are all committed
	// before its first message is due, even under the race detector.
	r.start(func(c *push.Config) { c.Delay = time.Second })
	conv := r.group(1, 2)
	r.subscribe(2, "bob")
	for i := 0; i < 3; i++ {
		r.send(conv, 1, "burst")
	}
	got := r.waitPushes("bob", 1, 4*time.Second)
	if got[0].Count != 3 || got[0].Seq != 3 || got[0].Title != "team" || got[0].Badge != 3 {
		t.Errorf("burst push = %+v, want one push of 3 messages", got[0])
	}
	first := r.ep.Of("bob")[0].At
	// Within the minimum interval (1s here): two more messages wait and
	// go out together once it has passed.
	r.send(conv, 1, "later")
	r.send(conv, 1, "later")
	got = r.waitPushes("bob", 2, 5*time.Second)
	second := r.ep.Of("bob")[1].At
	if gap := second.Sub(first); gap < time.Second {
		t.Errorf("second push %v after the first, want at least the minimum interval", gap)
	}
	if got[1].Count != 2 || got[1].Seq != 5 || got[1].Badge != 5 {
		t.Errorf("second push = %+v, want count 2 up to seq 5", got[1])
	}
	r.quiet("bob", 2, 1500*time.Millisecond)
}

// A push's count is of the messages its devices have not got: those a
// session acknowledged (or the user read) while it waited out the minimum
// interval are no longer "new", though the push still goes for the rest.
// Reactions between them (entries of the stream, not messages) must not
// make the acknowledged ones count again.
func TestAPushCountsOnlyTheMessagesNotAcknowledgedWhileItWaited(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) { c.Delay, c.MinInterval = 300*time.Millisecond, 3*time.Second })
	conv := r.group(1, 2, 3)
	r.subscribe(2, "bob")
	r.send(conv, 1, "first")
	r.waitPushes("bob", 1, 4*time.Second)
	r.send(conv, 1, "second")
	third := r.send(conv, 1, "third")
	for _, e := range []string{"👍", "🎉", "👀"} {
		r.react(conv, 3, third, e)
	}
	last := r.send(conv, 1, "fourth")
	r.waitCount(1, 4*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'pending' AND count = 3`)
	r.ack(conv, 2, third)
	got := r.waitPushes("bob", 2, 6*time.Second)
	if got[1].Count != 1 || got[1].Seq != last {
		t.Errorf("second push = %+v, want 1 new message (seq %d): seqs 2 and 3 were acknowledged while it waited", got[1], last)
	}
}

// bobAndCarol starts a rig with a group of users 1, 2 and 3, bob (2) and
// carol (3) with a device each.
func bobAndCarol(t *testing.T) (*rig, int64) {
	t.Helper()
	r := newRig(t)
	r.start(nil)
	conv := r.group(1, 2, 3)
	r.subscribe(2, "bob")
	r.subscribe(3, "carol")
	return r, conv
}

func TestMutedConversationIsNotPushedButAMentionIs(t *testing.T) {
	t.Parallel()
	r, conv := bobAndCarol(t)
	r.settings(conv, 2, chat.ConversationSettings{Muted: true, Mentions: true})
	r.settings(conv, 3, chat.ConversationSettings{Muted: true, Mentions: false})
	r.send(conv, 1, "nobody is woken")
	r.quiet("bob", 0, 800*time.Millisecond)
	r.send(conv, 1, "@2 and @3, look")
	got := r.waitPushes("bob", 1, 3*time.Second)
	if got[0].Seq != 2 || got[0].Count != 1 {
		t.Errorf("mention push = %+v", got[0])
	}
	r.quiet("carol", 0, 500*time.Millisecond)

	// A mute that ended pushes again.
	past := time.Now().Add(-time.Minute)
	r.settings(conv, 3, chat.ConversationSettings{Muted: true, MutedUntil: &past, Mentions: false})
	r.send(conv, 1, "mute is over")
	r.waitPushes("carol", 1, 3*time.Second)
}

// A blocked user can still write in a group the blocker is in, and the
// blocker's sessions still get it, but the blocker's devices are never
// woken for it; the other members' are, and the blocker's are for
// everyone else's messages.
func TestMessageFromABlockedSenderIsNotPushedToTheBlocker(t *testing.T) {
	t.Parallel()
	r, conv := bobAndCarol(t)
	if err := r.store.Block(context.Background(), 2, 1, 100); err != nil {
		t.Fatal(err)
	}
	seq := r.send(conv, 1, "from the blocked one")
	// carol's push proves the message was decided: bob's silence after it
	// is the block, not a decision still to come.
	if got := r.waitPushes("carol", 1, 3*time.Second); got[0].Seq != seq || got[0].SenderID != 1 {
		t.Errorf("carol's push = %+v, want seq %d from user 1", got[0], seq)
	}
	r.quiet("bob", 0, 800*time.Millisecond)

	next := r.send(conv, 3, "from carol")
	got := r.waitPushes("bob", 1, 3*time.Second)
	if got[0].Seq != next || got[0].SenderID != 3 || got[0].Count != 1 {
		t.Errorf("bob's push = %+v, want carol's message %d alone", got[0], next)
	}
	r.quiet("bob", 1, 500*time.Millisecond)
}

func TestPreviewCarriesTheText(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Preview = true })
	r.send(conv, 1, "the text")
	if got := r.waitPushes("bob", 1, 3*time.Second); got[0].Body != "the text" {
		t.Errorf("body = %q, want the preview", got[0].Body)
	}
}

func TestGoneSubscriptionDeletesTheDevice(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(nil)
	conv := r.direct(1, 2)
	id := r.subscribe(2, "bob")
	r.ep.Script("bob", http.StatusGone)
	r.send(conv, 1, "hello")
	r.waitCount(0, 3*time.Second, `SELECT count(*) FROM push_device WHERE id = $1`, id) // deleted after the 410
	if n := r.count(`SELECT count(*) FROM push_job`); n != 0 {
		t.Errorf("%d jobs left", n)
	}
}

func TestServerErrorIsRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, nil)
	r.ep.Script("bob", http.StatusInternalServerError)
	r.send(conv, 1, "hello")
	got := r.waitPushes("bob", 1, 5*time.Second)
	all := r.ep.Pushes()
	if len(all) != 2 || all[0].Status != 500 || all[1].Status != 201 {
		t.Fatalf("requests: %s", describe(all))
	}
	if gap := all[1].At.Sub(all[0].At); gap < time.Second {
		t.Errorf("retried after %v, before the endpoint's Retry-After: 1", gap)
	}
	if got[0].Seq != 1 {
		t.Errorf("retry = %+v", got[0])
	}
	r.quiet("bob", 1, 500*time.Millisecond)
}

// A push whose retry comes due after its message is older than MaxAge is
// not sent: the rule that old messages are never pushed holds for a retry
// as for the first decision (a phone woken an hour late for a message it
// may have seen elsewhere is noise). It is counted as expired.
func TestARetryDueAfterMaxAgeIsNotSent(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	reg := prometheus.NewRegistry()
	r.start(func(c *push.Config) {
		c.MaxAge, c.Registerer = 1500*time.Millisecond, reg
		c.BackoffMin, c.BackoffMax = 2*time.Second, 2*time.Second
	})
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	r.ep.Script("bob", http.StatusInternalServerError)
	r.send(conv, 1, "hello")
	r.waitRequests(1, 3*time.Second, "a push to be attempted")
	r.waitCount(0, 6*time.Second, `SELECT count(*) FROM push_job WHERE state <> 'sent'`)
	if all := r.ep.Pushes(); len(all) != 1 || all[0].Status != http.StatusInternalServerError {
		t.Fatalf("requests: %s, want the one answered 500", describe(all))
	}
	if got, want := skippedByReason(t, reg), map[string]float64{"expired": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("chat_push_skipped_total by reason = %v, want %v", got, want)
	}
}

func TestTwoNodesPushOncePerMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(nil)
	r.start(nil)
	conv := r.group(1, 2)
	r.subscribe(2, "bob")
	for i := 0; i < 5; i++ {
		r.send(conv, 1, "x")
		time.Sleep(1200 * time.Millisecond / 5)
	}
	r.waitPushes("bob", 1, 3*time.Second)
	time.Sleep(1500 * time.Millisecond)
	got := notifications(t, r.ep.Of("bob"))
	total := 0
	for _, n := range got {
		total += n.Count
	}
	if total != 5 {
		t.Errorf("pushes %+v count %d messages, want each of 5 once", got, total)
	}
}

func TestPushDecidedByAStoppedNodeIsSentByAnother(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stopA := r.start(func(c *push.Config) { c.Timeout = 300 * time.Millisecond })
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	r.ep.Hang("bob", true)
	r.send(conv, 1, "hello")
	r.waitRequests(1, 3*time.Second, "a request to reach the endpoint")
	stopA()
	t.Logf("after stop: %s", dumpJobs(r))
	r.ep.Hang("bob", false)
	r.start(nil)
	restarted := time.Now()
	got := r.waitPushes("bob", 1, 5*time.Second)
	t.Logf("sent %v after the restart", time.Since(restarted))
	if got[0].Seq != 1 {
		t.Errorf("push = %+v", got[0])
	}
	r.quiet("bob", 1, 500*time.Millisecond)
}

func dumpJobs(r *rig) string {
	rows, _ := r.pool.Query(context.Background(), `SELECT id, state, not_before - now(), lease_until - now(), attempts, claims, device_ids FROM push_job`)
	defer rows.Close()
	s := ""
	for rows.Next() {
		vals, _ := rows.Values()
		s += fmt.Sprintf("%v\n", vals)
	}
	return s
}

// TestConcurrentDecisionsDecideEachMessageOnce: a second decider (a leader
// that lost its lease without knowing yet) deciding the same conversation
// at the same time waits for the first and then finds nothing left.
func TestConcurrentDecisionsDecideEachMessageOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	conv := r.group(1, 2)
	r.subscribe(2, "bob")
	// The cursor exists (committed) before either decision, as for every
	// conversation but a brand-new one.
	if _, err := r.pool.Exec(context.Background(), `INSERT INTO push_cursor (conversation_id, seq) VALUES ($1, 0)`, conv); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r.send(conv, 1, "x")
	}
	time.Sleep(r.cfg.Delay + 50*time.Millisecond)
	n, err := r.decideTwice(conv, func(n int, err error) {
		if err != nil || n != 1 {
			t.Fatalf("first decision: %d jobs, %v", n, err)
		}
	})
	if err != nil || n != 0 {
		t.Errorf("the second decision wrote %d jobs (%v), want none", n, err)
	}
	if c := r.count(`SELECT sum(count) FROM push_job WHERE user_id = 2`); c != 3 {
		t.Errorf("jobs count %d messages, want 3", c)
	}
}

// TestFullQueueLeavesPushesInPostgreSQLAndCountsThem: with one worker and
// a queue of two held by a hanging push service, the other due pushes stay
// in PostgreSQL (memory stays bounded) and are counted as overflow; once
// the service answers they all go out.
func TestFullQueueLeavesPushesInPostgreSQLAndCountsThem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	reg := prometheus.NewRegistry()
	r.start(func(c *push.Config) {
		c.Workers, c.QueueSize, c.Registerer, c.Timeout = 1, 2, reg, 3*time.Second
	})
	var names []string
	for u := int64(2); u <= 7; u++ {
		name := fmt.Sprint("u", u)
		names = append(names, name)
		r.subscribe(u, name)
		r.ep.Hang(name, true)
		r.send(r.direct(1, u), 1, "hi")
	}
	gauge := func(name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		return 0
	}
	deadline := time.Now().Add(5 * time.Second)
	for gauge("chat_push_queue_overflow_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no overflow counted; queue %v", gauge("chat_push_queue_length"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if q := gauge("chat_push_queue_length"); q > 2 {
		t.Errorf("queue length %v above its bound 2", q)
	}
	for _, n := range names {
		r.ep.Hang(n, false)
	}
	for _, n := range names {
		r.waitPushes(n, 1, 15*time.Second)
	}
}

func TestConversationWithoutDevicesIsPassedOverWithoutReadingItsMessages(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// A minute's delay: no message falls due during the test; the short
	// reconcile interval has the decider look at both conversations at once.
	r.start(func(c *push.Config) { c.Delay = time.Minute; c.ReconcileInterval = 50 * time.Millisecond })
	bare := r.direct(1, 2)
	pushed := r.direct(3, 4)
	r.subscribe(4, "dave")
	var last int64
	for i := range 3 {
		last = r.send(bare, 1, fmt.Sprint("hello ", i))
		r.send(pushed, 3, fmt.Sprint("hello ", i))
	}
	r.waitCount(last, 5*time.Second, `SELECT coalesce(max(seq), 0) FROM push_cursor WHERE conversation_id = $1`, bare)
	// The conversation with a device waits for its messages to fall due.
	if n := r.count(`SELECT coalesce(max(seq), 0) FROM push_cursor WHERE conversation_id = $1`, pushed); n != 0 {
		t.Errorf("cursor of the conversation with a device at %d before its messages were due", n)
	}
	r.quiet("dave", 0, 300*time.Millisecond)
}

// TestABlockOrAMuteSilencesAPushAlreadyDecided: a push waiting out the
// minimum interval when its user blocks the sender, or mutes the
// conversation, is not sent: "a user you blocked never pushes you", and
// a muted conversation pushes nothing, also when the message came just
// before.
func TestABlockOrAMuteSilencesAPushAlreadyDecided(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) { c.Preview, c.MinInterval = true, 2*time.Second })
	ctx := context.Background()
	r.subscribe(2, "bob")
	pending := `SELECT count(*) FROM push_job WHERE kind = 'message' AND state = 'pending'`

	withAlice := r.direct(1, 2)
	r.send(withAlice, 1, "hi")
	r.waitPushes("bob", 1, 3*time.Second)
	r.send(withAlice, 1, "from alice, now blocked")
	r.waitCount(1, 3*time.Second, pending) // decided, waiting for the minimum interval
	if err := r.store.Block(ctx, 2, 1, 100); err != nil {
		t.Fatal(err)
	}
	r.quiet("bob", 1, 2500*time.Millisecond)

	withCarol := r.direct(3, 2)
	r.send(withCarol, 3, "hi")
	r.waitPushes("bob", 2, 3*time.Second)
	r.send(withCarol, 3, "from carol, now muted")
	r.waitCount(1, 3*time.Second, pending)
	r.settings(withCarol, 2, chat.ConversationSettings{Muted: true, Mentions: true})
	r.quiet("bob", 2, 2500*time.Millisecond)
	r.waitCount(0, 3*time.Second, `SELECT count(*) FROM push_job WHERE state <> 'sent'`)
}

// TestAPushNotSentDoesNotHoldBackTheNextOne: a push waiting out the
// minimum interval whose message bob read meanwhile is not sent; it is no
// push, so the next message's push is not held back another interval.
func TestAPushNotSentDoesNotHoldBackTheNextOne(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.MinInterval = 2 * time.Second })
	r.send(conv, 1, "one")
	r.waitPushes("bob", 1, 3*time.Second)
	two := r.send(conv, 1, "two")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE kind = 'message' AND state = 'pending'`)
	r.ack(conv, 2, two)
	// Claimed when due, after the interval, and skipped.
	r.waitCount(0, 4*time.Second, `SELECT count(*) FROM push_job WHERE state <> 'sent'`)
	r.quiet("bob", 1, 0)
	sent := time.Now()
	three := r.send(conv, 1, "three")
	got := r.waitPushes("bob", 2, 5*time.Second)
	if got[1].Seq != three {
		t.Errorf("second push = %+v, want seq %d", got[1], three)
	}
	// Due after the delay (300 ms), the last push being more than the
	// interval ago.
	if d := r.ep.Of("bob")[1].At.Sub(sent); d > 1500*time.Millisecond {
		t.Errorf("push %v after its message, held back by a push never sent", d)
	}
}

// TestAUserWhosePushServiceHangsDelaysNoOneElse: a user's devices can
// point at a push service that never answers (a broken one, or one they
// run to hold the server's workers); their pushes take UserInFlight
// workers for Timeout, never all of them, so another user's push goes
// out on time.
func TestAUserWhosePushServiceHangsDelaysNoOneElse(t *testing.T) {
	r := newRig(t)
	r.start(func(c *push.Config) { c.Workers = 2; c.UserInFlight = 1; c.Timeout = 5 * time.Second })
	r.subscribe(9, "stuck")
	r.ep.Hang("stuck", true)
	r.subscribe(10, "victim")
	for range 3 {
		r.send(r.group(8, 9), 8, "to the one whose push service hangs")
	}
	// Their pushes are due first, so they are claimed first.
	deadline := time.Now().Add(5 * time.Second)
	for r.count(`SELECT count(*) FROM push_job WHERE user_id = 9 AND state = 'sending'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no push of user 9 was claimed:\n%s", dumpJobs(r))
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	r.send(r.direct(8, 10), 8, "to someone else")
	r.waitPushes("victim", 1, 10*time.Second)
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("another user's push waited %v behind a hanging push service (timeout 5s)", d)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 9 AND state = 'sending' AND lease_until >= now()`); n != 1 {
		t.Errorf("%d pushes of user 9 in flight, want UserInFlight = 1:\n%s", n, dumpJobs(r))
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 9`); n != 3 {
		t.Errorf("user 9 has %d push jobs, want 3 (one per conversation)", n)
	}
}

// TestTwoNodesClaimingAtOnceKeepAUsersPushesWithinTheLimit: the limit of
// a user's pushes in flight holds across nodes. A claim counts what is in
// flight in its snapshot, so a second node claiming while the first's
// claim had not committed yet took the limit again (SKIP LOCKED passed
// over the first's rows to the next ones of the same user).
func TestTwoNodesClaimingAtOnceKeepAUsersPushesWithinTheLimit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.subscribe(9, "nine")
	var convs []int64
	for i := range 8 {
		c := r.group(8, 9)
		r.send(c, 8, fmt.Sprintf("message %d", i))
		convs = append(convs, c)
	}
	ctx := context.Background()
	node1, err := push.New(r.cfg) // UserInFlight 4 by default
	if err != nil {
		t.Fatal(err)
	}
	node2, err := push.New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Decided once the messages are Delay old (no node runs here).
	deadline := time.Now().Add(5 * time.Second)
	for r.count(`SELECT count(*) FROM push_job WHERE user_id = 9 AND state = 'pending'`) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("user 9's 8 pushes were not decided:\n%s", dumpJobs(r))
		}
		time.Sleep(20 * time.Millisecond)
		if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			_, err := push.DecideInTx(ctx, node1, tx, convs)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.pool.Exec(ctx, `UPDATE push_job SET not_before = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}

	tx1, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	first, err := push.ClaimInTx(ctx, node1, tx1, 4) // a queue with room for 4
	if err != nil || len(first) != 4 {
		t.Fatalf("the first node claimed %v (%v), want 4 pushes", first, err)
	}
	type claimed struct {
		ids []int64
		err error
	}
	second := make(chan claimed, 1)
	go func() {
		var ids []int64
		err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			var err error
			ids, err = push.ClaimInTx(ctx, node2, tx, 100)
			return err
		})
		second <- claimed{ids, err}
	}()
	// The second claim runs while the first has not committed yet.
	var res claimed
	done := false
	select {
	case res = <-second:
		done = true
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !done {
		res = <-second
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 9 AND state = 'sending' AND lease_until >= now()`); n != 4 {
		t.Fatalf("%d pushes of user 9 in flight after two nodes claimed at once, want UserInFlight = 4:\n%s", n, dumpJobs(r))
	}
}

// TestASkippedPushIsCountedUnderWhatSilencedIt: a push waiting out the
// minimum interval and not sent is counted in chat_push_skipped_total
// under its own reason: its user blocked the sender ("blocked") or muted
// the conversation ("muted"), not as a recall, so an operator reading the
// metric can tell them apart. (A recall of a waiting push's only message
// drops the push before it is claimed: no skip at all.)
func TestASkippedPushIsCountedUnderWhatSilencedIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	reg := prometheus.NewRegistry()
	r.start(func(c *push.Config) { c.MinInterval, c.Registerer = 2*time.Second, reg })
	ctx := context.Background()
	pending := `SELECT count(*) FROM push_job WHERE kind = 'message' AND state = 'pending' AND user_id = $1`
	type pair struct {
		from, to int64
		name     string
		conv     int64
	}
	pairs := []*pair{{from: 1, to: 2, name: "blocker"}, {from: 3, to: 4, name: "muter"}}
	for _, p := range pairs {
		r.subscribe(p.to, p.name)
		p.conv = r.direct(p.from, p.to)
		r.send(p.conv, p.from, "hi")
	}
	for _, p := range pairs {
		r.waitPushes(p.name, 1, 3*time.Second)
		r.send(p.conv, p.from, "one more")
	}
	for _, p := range pairs {
		r.waitCount(1, 3*time.Second, pending, p.to) // decided, waiting for the minimum interval
	}
	if err := r.store.Block(ctx, 2, 1, 100); err != nil {
		t.Fatal(err)
	}
	r.settings(pairs[1].conv, 4, chat.ConversationSettings{Muted: true})
	r.waitCount(0, 4*time.Second, `SELECT count(*) FROM push_job WHERE state <> 'sent'`)
	for _, p := range pairs {
		r.quiet(p.name, 1, 0)
	}
	if got, want := skippedByReason(t, reg), map[string]float64{"blocked": 1, "muted": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("chat_push_skipped_total by reason = %v, want %v", got, want)
	}
}

// skippedByReason reads chat_push_skipped_total from reg, by reason.
func skippedByReason(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return counterBy(t, reg, "chat_push_skipped_total", "reason")
}

// counterBy reads counter name from reg, summed by label.
func counterBy(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					got[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// A device whose push service answers 410 to two pushes in flight at once
// (a user's two conversations) is one device deleted: the metric counts
// the rows deleted, not the answers.
func TestADeviceGoneForTwoPushesAtOnceIsCountedDeletedOnce(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		arrived int
		both    = make(chan struct{})
	)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(both)
		}
		mu.Unlock()
		select { // the first waits for the second: both in flight
		case <-both:
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusGone)
	}))
	t.Cleanup(svc.Close)
	r := newRig(t)
	reg := prometheus.NewRegistry()
	r.start(func(c *push.Config) { c.Registerer = reg })
	sub := webpushtest.NewSubscriber()
	id, _, err := r.devices.RegisterDevice(context.Background(), 2, chat.DeviceRequest{Platform: "webpush", Endpoint: svc.URL + "/dead",
		Keys: &chat.DeviceKeys{P256dh: sub.P256dh(), Auth: sub.AuthB64()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.send(r.direct(1, 2), 1, "hi")
	r.send(r.direct(3, 2), 3, "hello")
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_device WHERE id = $1`, id)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job`)
	select {
	case <-both:
	default:
		t.Fatal("the two pushes were not in flight together")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var deleted float64
	for _, mf := range mfs {
		if mf.GetName() == "chat_push_devices_deleted_total" {
			deleted = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if deleted != 1 {
		t.Errorf("chat_push_devices_deleted_total = %v after one device was deleted", deleted)
	}
}
