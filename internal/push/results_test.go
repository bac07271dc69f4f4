package push_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// TestALateResultOfAnEarlierAttemptLeavesTheNewerClaimAlone: a node's
// result came back after its claim's lease ran out, and another node has
// claimed the push again meanwhile (attempts moved on). Whatever the late
// result says, it must not end, reschedule or release the newer claim's
// push: a third claim would send it once more, or a push still owed would
// be forgotten.
func TestALateResultOfAnEarlierAttemptLeavesTheNewerClaimAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	dev := r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	r.send(conv, 1, "hi bob")
	p := r.pusher()
	first := r.claimBobs(p, conv, time.Second)
	// The first node sends it (its result comes back late).
	if err := push.MarkStarted(ctx, p, first); err != nil {
		t.Fatal(err)
	}
	// Its lease ran out and another node claimed it.
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
	if second := r.claims(p, 10, time.Minute); len(second) != 1 {
		t.Fatalf("the second node claimed %d pushes, want bob's", len(second))
	}
	for _, outcome := range []string{"retry", "shown", "done"} {
		if err := push.WriteResult(ctx, p, first, outcome, dev); err != nil {
			t.Fatal(err)
		}
		var (
			attempts int
			state    string
			leased   bool
		)
		err := r.pool.QueryRow(ctx, `SELECT attempts, state, lease_until IS NOT NULL AND lease_until > now() FROM push_job WHERE id = $1`, first.ID()).
			Scan(&attempts, &state, &leased)
		if err != nil {
			t.Fatalf("after the first attempt's late %q result: bob's push: %v", outcome, err)
		}
		if attempts != 2 || state != "sending" || !leased {
			t.Fatalf("after the first attempt's late %q result: attempts %d, state %s, leased %v; want the newer claim's (2, sending, true)",
				outcome, attempts, state, leased)
		}
	}
}

// TestALateResultLeavesAPushALaterClaimHandedBackAlone: node A's claim of
// a push ran out of lease, node B claimed it and handed it back (stopping:
// released unsent, or its send cancelled, which is no attempt), so the
// push is on the attempt A's claim was on again. A's result, coming back
// late, is still not the push's: whatever it says, the push stays as B
// left it, owed, and goes out at the next claim.
func TestALateResultLeavesAPushALaterClaimHandedBackAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	p := r.pusher()
	type situation struct{ back, late string }
	var cases []situation
	for _, back := range []string{"release", "uncounted retry"} {
		for _, late := range []string{"retry", "shown", "done", "skipped"} {
			cases = append(cases, situation{back, late})
		}
	}
	// One recipient (user 2+i) for each case.
	devs := make(map[int64]int64)
	var convs []int64
	for i := range cases {
		user := int64(2 + i)
		devs[user] = r.subscribe(user, fmt.Sprint("user", user))
		conv := r.direct(1, user)
		r.send(conv, 1, "hi")
		convs = append(convs, conv)
	}
	r.decideAll(p, convs, int64(len(convs)))
	byUser := func(cs []push.Claim) map[int64]push.Claim {
		m := make(map[int64]push.Claim)
		for _, c := range cs {
			m[c.User()] = c
		}
		if len(m) != len(cases) {
			t.Fatalf("claimed the pushes of %d users, want %d\n%s", len(m), len(cases), dumpJobs(r))
		}
		return m
	}
	a := byUser(r.claims(p, 100, 2*time.Second))
	// A sends them (its results come back late).
	for _, c := range a {
		if err := push.MarkStarted(ctx, p, c); err != nil {
			t.Fatal(err)
		}
	}
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
	b := byUser(r.claims(p, 100, time.Minute))
	for i, c := range cases {
		user := int64(2 + i)
		if err := push.WriteResult(ctx, p, b[user], c.back, devs[user]); err != nil {
			t.Fatal(err)
		}
	}
	state := func(user int64) string {
		return pgtest.QueryOne[string](t, r.pool, `SELECT COALESCE((
    SELECT format('state %s, attempts %s, lease %s, due %s, devices %s', state, attempts, lease_until, not_before, device_ids)
    FROM push_job WHERE user_id = $1), 'no push')
  || COALESCE((SELECT format(', last push %s', pushed_at) FROM push_last WHERE user_id = $1), ', no last push')`, user)
	}
	handedBack := make(map[int64]string)
	for i := range cases {
		handedBack[int64(2+i)] = state(int64(2 + i))
	}
	for i, c := range cases {
		user := int64(2 + i)
		if err := push.WriteResult(ctx, p, a[user], c.late, devs[user]); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cases {
		user := int64(2 + i)
		if got := state(user); got != handedBack[user] {
			t.Errorf("B handed the push back (%s), then A's late %q result of its expired claim changed it:\n  %s\nwant as B left it:\n  %s",
				c.back, c.late, got, handedBack[user])
		}
	}
	if t.Failed() {
		return
	}
	// Still owed: the next claim sends each.
	r.start(nil)
	for i := range cases {
		r.waitPushes(fmt.Sprint("user", 2+i), 1, 5*time.Second)
	}
}

// decideAll decides convs' pushes, once their messages are Delay old, as
// a decider does, until there are want of them.
func (r *rig) decideAll(p *push.Pusher, convs []int64, want int64) {
	r.t.Helper()
	ctx := context.Background()
	testkit.WaitFor(r.t, 5*time.Second, "the pushes decided", func() bool {
		if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			_, err := push.DecideInTx(ctx, p, tx, convs)
			return err
		}); err != nil {
			r.t.Fatal(err)
		}
		return r.count(`SELECT count(*) FROM push_job WHERE conversation_id = ANY($1)`, convs) >= want
	})
}

// pusher is a node's pusher of r.cfg that the test drives by hand:
// nothing runs until it calls it.
func (r *rig) pusher() *push.Pusher {
	r.t.Helper()
	p, err := push.New(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// claimBobs decides conv's push, bob's alone, and claims it for lease as
// a node's claimer does.
func (r *rig) claimBobs(p *push.Pusher, conv int64, lease time.Duration) push.Claim {
	r.t.Helper()
	r.decideAll(p, []int64{conv}, 1)
	cs := r.claims(p, 10, lease)
	if len(cs) != 1 {
		r.t.Fatalf("claimed %d pushes, want bob's", len(cs))
	}
	return cs[0]
}

// claims claims up to n due pushes for lease, in a transaction of its own,
// as a node's claimer does.
func (r *rig) claims(p *push.Pusher, n int, lease time.Duration) []push.Claim {
	r.t.Helper()
	var cs []push.Claim
	if err := pgx.BeginFunc(context.Background(), r.pool, func(tx pgx.Tx) error {
		var err error
		cs, err = push.ClaimsInTx(context.Background(), p, tx, n, lease)
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
	return cs
}

// hangingHook is a webhook receiver whose first request never answers
// until its client gives up; it answers the others 202.
type hangingHook struct {
	arrived chan struct{}
	mu      sync.Mutex
	n       int
}

func (h *hangingHook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h.mu.Lock()
	h.n++
	first := h.n == 1
	h.mu.Unlock()
	// Read to the end: only then does the server notice the client go.
	_, _ = io.Copy(io.Discard, req.Body)
	if first {
		close(h.arrived)
		<-req.Context().Done()
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (h *hangingHook) requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// TestASendCancelledByAStoppingNodeIsNoAttempt: a node stopped while its
// push was in flight (the sender had not answered): stopping cancels the
// send, and that was no attempt of the push. It does not count toward
// MaxAttempts: with one attempt allowed, the next node sends it.
func TestASendCancelledByAStoppingNodeIsNoAttempt(t *testing.T) {
	t.Parallel()
	hook := &hangingHook{arrived: make(chan struct{})}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	withHook := func(c *push.Config) {
		c.WebhookURL, c.WebhookSecret, c.Timeout, c.MaxAttempts = srv.URL, "secret-secret-secret-secret-1234", 5*time.Second, 1
	}
	r := newRig(t)
	stop := r.start(withHook)
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token"})
	r.send(r.direct(1, 2), 1, "hi")
	testkit.Receive(t, hook.arrived, 5*time.Second, "the push never reached the webhook")
	stop()
	var attempts int
	var leased bool
	if err := r.pool.QueryRow(context.Background(), `SELECT attempts, lease_until IS NOT NULL AND lease_until > now() FROM push_job WHERE user_id = 2`).
		Scan(&attempts, &leased); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || leased {
		t.Fatalf("bob's push after the node stopped mid-send: attempts %d, leased %v; want no attempt counted, not leased (0, false)", attempts, leased)
	}
	r.start(withHook)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if n := hook.requests(); n != 2 {
		t.Fatalf("the webhook got %d requests, want the cancelled one and the next node's", n)
	}
}

// TestANotificationAStoppingNodeSentToADeviceIsKeptAsShown: a stopping
// node cancelled a push's send to one device after another device got it
// (no attempt: the push is owed to the first device again, attempts as
// before the claim). By the next claim the user has read the message, so
// nothing more is sent; the notification is on a device all the same and
// is kept as the pair's sent one, so a recall removes it.
func TestANotificationAStoppingNodeSentToADeviceIsKeptAsShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.subscribe(2, "phone")
	owed := r.subscribe(2, "laptop")
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "hi bob")
	p := r.pusher()
	c := r.claimBobs(p, conv, time.Minute)
	// The phone got it; the laptop's send was cancelled by the stop.
	if err := push.WriteResult(ctx, p, c, "uncounted retry", owed); err != nil {
		t.Fatal(err)
	}
	r.ack(conv, 2, seq)
	r.start(nil)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sent'`); n != 1 {
		t.Fatalf("bob's notification, on his phone, after the next claim found it read: %d kept as sent, want 1 (a recall must remove it)\n%s", n, dumpJobs(r))
	}
	if got := len(r.ep.Of("laptop")); got != 0 {
		t.Fatalf("the laptop got %d pushes of a read message, want none", got)
	}
}

// TestAPushAStoppingNodeSentToADeviceHoldsTheMinimumIntervalAfterTwoStops:
// a stopping node's cancelled send left a push owed to the laptop after
// the phone got it (no attempt), and the next node's claim of it was
// handed back unsent by another stop. The phone's push was a push all the
// same: the pair's next one waits MinInterval after it.
func TestAPushAStoppingNodeSentToADeviceHoldsTheMinimumIntervalAfterTwoStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.cfg.MinInterval = time.Minute
	r.subscribe(2, "phone")
	owed := r.subscribe(2, "laptop")
	conv := r.direct(1, 2)
	r.send(conv, 1, "hi bob")
	p := r.pusher()
	r.decideAll(p, []int64{conv}, 1)
	for _, back := range []string{"uncounted retry", "release"} {
		cs := r.claims(p, 10, time.Minute)
		if len(cs) != 1 {
			t.Fatalf("claimed %d pushes before the %q, want bob's\n%s", len(cs), back, dumpJobs(r))
		}
		if err := push.WriteResult(ctx, p, cs[0], back, owed); err != nil {
			t.Fatal(err)
		}
	}
	r.send(conv, 1, "are you there?")
	r.decideAll(p, []int64{conv}, 2)
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'pending' AND not_before > now() + interval '30 seconds'`); n != 1 {
		t.Fatalf("bob's next push after the phone got one and two stops handed it back: %d waiting for the minimum interval, want 1\n%s", n, dumpJobs(r))
	}
}

// TestARetryAnsweredBeforeANodeStopsIsAnAttempt: the phone's push service
// answered 503 (retry) and then the node stopped, cancelling the laptop's
// send, which had no answer. The phone's send was an attempt all the same:
// it counts toward MaxAttempts, so repeated stops cannot retry a push
// beyond its limit. With one attempt allowed, the next node gives up.
func TestARetryAnsweredBeforeANodeStopsIsAnAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	reg := prometheus.NewRegistry()
	oneAttempt := func(c *push.Config) { c.MaxAttempts, c.Registerer = 1, reg }
	stop := r.start(oneAttempt)
	r.subscribe(2, "phone")
	r.subscribe(2, "laptop")
	r.ep.Script("phone", http.StatusServiceUnavailable)
	r.ep.Hang("laptop", true)
	r.send(r.direct(1, 2), 1, "hi bob")
	testkit.WaitFor(t, 5*time.Second, "the phone's 503 answered to the node", func() bool {
		return counterBy(t, reg, "chat_push_sent_total", "result")["retry"] >= 1
	})
	// The laptop's send is in flight (its request arrived) when the stop
	// cuts it.
	r.waitRequests(2, 5*time.Second, "the laptop's request at its push service")
	stop()
	if n := r.count(`SELECT attempts FROM push_job WHERE user_id = 2`); n != 1 {
		t.Fatalf("bob's push after the phone answered 503 and the node stopped: attempts %d, want 1 (the phone's send counted)\n%s", n, dumpJobs(r))
	}
	r.ep.Hang("laptop", false)
	reg = prometheus.NewRegistry()
	r.start(oneAttempt)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if got := skippedByReason(t, reg); got["gave_up"] != 1 {
		t.Errorf("chat_push_skipped_total by reason = %v, want gave_up 1", got)
	}
	if all := r.ep.Pushes(); len(all) != 2 {
		t.Fatalf("requests: %s\nwant the phone's 503 and the laptop's cancelled one", describe(all))
	}
}

// TestADeviceGoneInAPushAStoppingNodeHandedBackIsDeletedNotSentAgain:
// the phone's push service answered 410 (its subscription is gone) and
// then the node stopped, cancelling the laptop's send: nothing reached a
// device, so the claim is handed back with its devices as they were. The
// phone is deleted with that hand-back all the same: the next node's
// claim sends to the laptop alone, and no stop sends to the phone again.
func TestADeviceGoneInAPushAStoppingNodeHandedBackIsDeletedNotSentAgain(t *testing.T) {
	t.Parallel()
	r, phone := phoneAnswersAsAStopCutsTheLaptop(t, http.StatusGone, "gone")
	if n := r.count(`SELECT count(*) FROM push_device WHERE id = $1`, phone); n != 0 {
		t.Fatalf("the phone, answered 410 before the stop handed the push back, is still a device (%d rows)\n%s", n, dumpJobs(r))
	}
	theNextNodeSendsToTheLaptopAlone(t, r, http.StatusGone)
}

// TestADeviceThatRefusedAPushAStoppingNodeHandedBackIsNotSentItAgain: the
// phone's push service refused bob's push for good (400: any status but
// 2xx, 404, 410, 429 and 5xx) and then the node stopped, cancelling the
// laptop's send: the claim is handed back, nothing having reached a
// device. The refusal is final for that push, as a 410 is: the next
// node's claim sends to the laptop alone.
func TestADeviceThatRefusedAPushAStoppingNodeHandedBackIsNotSentItAgain(t *testing.T) {
	t.Parallel()
	r, _ := phoneAnswersAsAStopCutsTheLaptop(t, http.StatusBadRequest, "failed")
	theNextNodeSendsToTheLaptopAlone(t, r, http.StatusBadRequest)
}

// phoneAnswersAsAStopCutsTheLaptop has bob's phone's push service answer
// status to his push while his laptop's hangs, and stops the node once
// the node counted the phone's answer as result (its send outcome): the
// laptop's send is cut. It returns the rig and the phone's device.
func phoneAnswersAsAStopCutsTheLaptop(t *testing.T, status int, result string) (*rig, int64) {
	t.Helper()
	r := newRig(t)
	r.subscribe(2, "laptop")
	phone := r.subscribe(2, "phone")
	r.ep.Hang("laptop", true)
	r.ep.Script("phone", status)
	reg := prometheus.NewRegistry()
	stop := r.start(func(c *push.Config) { c.Registerer = reg })
	r.send(r.direct(1, 2), 1, "hi bob")
	testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("the phone's %d answered to the node", status), func() bool {
		return counterBy(t, reg, "chat_push_sent_total", "result")[result] >= 1
	})
	stop()
	return r, phone
}

// theNextNodeSendsToTheLaptopAlone starts another node, the laptop's push
// service answering again, and checks that it sends bob's push to the
// laptop and not to the phone, which answered status before the stop.
func theNextNodeSendsToTheLaptopAlone(t *testing.T, r *rig, status int) {
	t.Helper()
	r.ep.Hang("laptop", false)
	r.start(nil)
	r.waitPushes("laptop", 1, 5*time.Second)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	var toPhone int
	for _, p := range r.ep.Pushes() {
		if p.Path == "/push/phone" {
			toPhone++
		}
	}
	if toPhone != 1 {
		t.Fatalf("the phone got %d requests, want the one it answered %d\n%s", toPhone, status, describe(r.ep.Pushes()))
	}
}
