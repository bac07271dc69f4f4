package push_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

// heldRetry is a transport whose first 429 or 5xx answer reaches the
// pusher only once its send is cancelled: the answer came in the instant
// the node stopped.
type heldRetry struct {
	answered chan struct{}
	once     sync.Once
}

func (h *heldRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500) {
		first := false
		h.once.Do(func() { first = true; close(h.answered) })
		if first {
			<-req.Context().Done()
		}
	}
	return resp, err
}

// TestARetryAnsweredAsTheNodeStopsIsAnAttempt: the phone's push service
// answered 503, and the node stopped before the pusher looked at the
// answer. An answer received is an attempt, however close to the stop: it
// counts toward MaxAttempts (else each stop at that moment would retry
// the push once more). With one attempt allowed, the next node gives up.
func TestARetryAnsweredAsTheNodeStopsIsAnAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	held := &heldRetry{answered: make(chan struct{})}
	stop := r.start(func(c *push.Config) {
		c.MaxAttempts, c.HTTPClient = 1, &http.Client{Transport: held, Timeout: 5 * time.Second}
	})
	r.subscribe(2, "phone")
	r.ep.Script("phone", http.StatusServiceUnavailable)
	r.send(r.direct(1, 2), 1, "hi bob")
	testkit.Receive(t, held.answered, 5*time.Second, "the phone's push service never answered")
	stop()
	if n := r.count(`SELECT attempts FROM push_job WHERE user_id = 2`); n != 1 {
		t.Fatalf("bob's push after the phone answered 503 as the node stopped: attempts %d, want 1 (an answer is an attempt)\n%s", n, dumpJobs(r))
	}
	r.start(func(c *push.Config) { c.MaxAttempts = 1 })
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if all := r.ep.Pushes(); len(all) != 1 {
		t.Fatalf("requests: %s\nwant the phone's one 503", describe(all))
	}
}
