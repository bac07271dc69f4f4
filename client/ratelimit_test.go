package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// limitedNode starts a node whose users may send one message at once and
// one every two seconds after that. User 1 connects through a proxy
// (px) with its direct conversation with user 2 (conv).
func limitedNode(t *testing.T) (url string, px *proxy, a *client.Client, conv int64) {
	t.Helper()
	url = pgtest.NewDB(t)
	srv := testnode.Start(t, testnode.SecretEnv(t, url, map[string]string{
		"CHAT_LIMIT_SEND_RATE": "0.5", "CHAT_LIMIT_SEND_BURST": "1"}), nil)
	px = newProxy(t, srv.MQTTAddr())
	a = connect(t, testConfig(t, px.URL(), 1))
	return url, px, a, direct(t, a, 2)
}

// TestACommittedSendIsNotReportedRateLimited: chatd committed a message
// (success PUBACK) but the PUBACK lacked its seq, so the client
// re-publishes it to learn the seq. The sender's bucket is empty by then
// and chatd refuses the duplicate with 0x97 (docs/protocol.md "Rate
// limits": resend it later). Send must not report the committed message as
// refused for good: an app would show it failed, and a retry would store
// it twice.
func TestACommittedSendIsNotReportedRateLimited(t *testing.T) {
	t.Parallel()
	url, _, a, conv := limitedNode(t)
	a.StripAckSeq(1)
	seq, err := a.Send(ctxFor(t, 15*time.Second), conv, "committed")
	if err != nil || seq != 1 {
		t.Fatalf("Send of a committed message: seq %d, err %v; want seq 1", seq, err)
	}
	storedOnce(t, url, conv)
}

// sendWhosePUBACKIsLost sends one message through a node with a tight
// send limit and cuts the connection after it committed, before its
// PUBACK reaches the client; the client re-publishes it after
// reconnecting, while its bucket is empty. It fails unless Send returns
// that message's seq 1.
func sendWhosePUBACKIsLost(t *testing.T) (url string, a *client.Client, conv int64) {
	t.Helper()
	url, px, a, conv := limitedNode(t)
	px.Stall()
	done := sendAsync(t, a, conv, "committed, PUBACK lost", 20*time.Second)
	waitCommitted(t, url, conv)
	px.Kill() // the PUBACK never reaches the client
	r := <-done
	if r.err != nil || r.seq != 1 {
		t.Fatalf("Send of a committed message whose PUBACK was lost: seq %d, err %v; want seq 1", r.seq, r.err)
	}
	return url, a, conv
}

// TestASendWhosePUBACKWasLostIsNotReportedRateLimited: chatd committed a
// message but its PUBACK was lost with the connection; the client
// re-publishes it after reconnecting, while the sender's bucket is still
// empty, and chatd answers 0x97. Whether the first publish committed is
// unknown to the client at that point (here it did): Send must not report
// the message as refused for good, but resend it later as chatd asks and
// return its seq.
func TestASendWhosePUBACKWasLostIsNotReportedRateLimited(t *testing.T) {
	t.Parallel()
	url, _, conv := sendWhosePUBACKIsLost(t)
	storedOnce(t, url, conv)
}

// TestARateLimitedRequestSaysWhenToRetry: chatd's refusal of a request
// over the caller's API bucket carries error.retryAfter (docs/http.md
// "Rate limits": RPC replies have no Retry-After header), but the
// client's *Error dropped it, so a caller could only guess how long to
// back off. Error.RetryAfter carries it.
func TestARateLimitedRequestSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_LIMIT_API_RATE": "0.2", "CHAT_LIMIT_API_BURST": "2"}), nil)
	c := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	ctx := ctxFor(t, 10*time.Second)
	var err error
	for range 10 {
		if _, err = c.Inbox(ctx, client.InboxOptions{}); err != nil {
			break
		}
	}
	// One token every 5 s: the next is due in at most 5 s, in whole
	// seconds of at least 1.
	wantRetryAfter(t, "requests over the API bucket", err, 5*time.Second)
}

// wantRetryAfter fails t unless err is ErrRateLimited telling to retry in
// 1 s (whole seconds, at least 1) to most; what names the refused call.
func wantRetryAfter(t *testing.T, what string, err error, most time.Duration) {
	t.Helper()
	var e *client.Error
	if !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &e) {
		t.Fatalf("%s: %v, want ErrRateLimited", what, err)
	}
	if e.RetryAfter < time.Second || e.RetryAfter > most {
		t.Fatalf("RetryAfter %v, want 1s to %v (%v)", e.RetryAfter, most, e)
	}
}

// TestARateLimitedSendSaysWhenToRetry: chatd's PUBACK 0x97 for a send over
// the sender's bucket carries when to retry in its retryAfter user
// property (docs/protocol.md "Rate limits"), and Error.RetryAfter gives it
// to the caller, as for a rate-limited request.
func TestARateLimitedSendSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	_, _, a, conv := limitedNode(t)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := a.Send(ctx, conv, "within the burst"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Send(ctx, conv, "over")
	// One token every 2 s: the next is due in at most 2 s.
	wantRetryAfter(t, "a send over the bucket", err, 2*time.Second)
}

// TestAResendRefusedAsRateLimitedWaitsItsRetryAfter: a message whose
// PUBACK was lost is published again after the reconnection, while the
// sender's bucket is empty (one token every 2 s), and chatd refuses it
// with 0x97 and a retryAfter. The client must publish it again once that
// time has passed, not every 200, 400, 800 ms before it (each refused
// again, costing chatd a publish and the client its pause): the
// re-publish after the reconnection, then the one that succeeds.
func TestAResendRefusedAsRateLimitedWaitsItsRetryAfter(t *testing.T) {
	t.Parallel()
	_, a, _ := sendWhosePUBACKIsLost(t)
	if n := a.Stats().Resends; n > 2 {
		t.Fatalf("%d re-publishes, want 2: the one refused for 2 s and the one after the wait", n)
	}
}
