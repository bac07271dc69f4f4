package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAnAckTimeoutOverTenSecondsIsWaitedOut: AckTimeout (default 30s) is
// how long a send waits for its PUBACK before it publishes again. paho's
// own packet timeout (10s) cut every wait short, so a commit that took
// 12s on a slow database was published a second time, and an app that
// set a longer AckTimeout for a slow link got 10s. (chatd's send_timeout
// is 30s here: above 10s it was cut to 10s by the store, too.)
func TestAnAckTimeoutOverTenSecondsIsWaitedOut(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := testnode.Start(t, testnode.SecretEnv(t, url, map[string]string{"CHAT_SEND_TIMEOUT": "30s"}), nil)
	a := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	conv := direct(t, a, 2)

	ctx := context.Background()
	pg := mustConn(t, url)
	release := pgtest.LockTable(t, url, "message IN ACCESS EXCLUSIVE MODE")
	res := sendAsync(t, a, conv, "committed after 12 seconds", 40*time.Second)
	testkit.WaitFor(t, 10*time.Second, "the send's commit to wait for the table", func() bool {
		var n int
		if err := pg.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	// The database is slow for 12 seconds: longer than paho's packet
	// timeout, well within the ack timeout.
	select {
	case r := <-res:
		t.Fatalf("the send ended while its commit waited: seq %d, %v", r.seq, r.err)
	case <-time.After(12 * time.Second):
	}
	release()
	r := <-res
	if r.err != nil || r.seq != 1 {
		t.Fatalf("send: seq %d, %v; want 1", r.seq, r.err)
	}
	if n := a.Stats().Resends; n != 0 {
		t.Errorf("the send was published %d more times while its first PUBACK was on its way", n)
	}
}
