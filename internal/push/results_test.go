package push_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/push"
)

// TestALateResultOfAnEarlierAttemptLeavesTheNewerClaimAlone: a node's
// result came back after its claim's lease ran out, and another node has
// claimed the push again meanwhile (attempts moved on). Whatever the late
// result says, it must not end, reschedule or release the newer claim's
// push: a third claim would send it once more, or a push still owed would
// be forgotten.
func TestALateResultOfAnEarlierAttemptLeavesTheNewerClaimAlone(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	dev := r.subscribe(2, "bob")
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "hi bob")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM message WHERE conversation_id = $1 AND seq = $2
AND created_at <= now() - interval '400 milliseconds'`, conv, seq)
	p, err := push.New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.decide(ctx, p, conv); err != nil || n != 1 {
		t.Fatalf("decided %d jobs (%v), want 1", n, err)
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := push.ClaimInTx(ctx, p, tx, 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("claimed %v (%v), want bob's push", ids, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Its lease ran out and another node claimed it, as the claim does.
	if _, err := r.pool.Exec(ctx, `UPDATE push_job SET attempts = attempts + 1, lease_until = now() + interval '1 minute'
WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []string{"retry", "shown", "done"} {
		if err := push.WriteResult(ctx, p, ids[0], 1, outcome, dev); err != nil {
			t.Fatal(err)
		}
		var (
			attempts int
			state    string
			leased   bool
		)
		err := r.pool.QueryRow(ctx, `SELECT attempts, state, lease_until IS NOT NULL AND lease_until > now() FROM push_job WHERE id = $1`, ids[0]).
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
	select {
	case <-hook.arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the push never reached the webhook")
	}
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
