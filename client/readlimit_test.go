package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAReadReceiptRefusedAsRateLimitedIsPublishedAfterItsRetryAfter:
// read receipts are rate limited per user (docs/protocol.md "Rate
// limits"): MarkRead in more conversations at once than the bucket holds
// (reading through a backlog, "mark all read") has some refused with
// 0x97 and a retryAfter. Those are not refused for good: the client
// publishes them again once the retryAfter has passed, instead of
// dropping them and leaving those conversations unread on every device.
func TestAReadReceiptRefusedAsRateLimitedIsPublishedAfterItsRetryAfter(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := testnode.Start(t, testnode.SecretEnv(t, url, map[string]string{
		"CHAT_LIMIT_READ_RATE": "1", "CHAT_LIMIT_READ_BURST": "1"}), nil)
	broker := "mqtt://" + srv.MQTTAddr()
	a := connect(t, testConfig(t, broker, 1))
	b := connect(t, testConfig(t, broker, 2))
	convs := []int64{direct(t, a, 2)}
	for range 2 {
		g, err := a.CreateGroup(ctxFor(t, 10*time.Second), "read me", []int64{2})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, g.ID)
	}
	for _, conv := range convs {
		sendN(t, a, conv, 1, "m")
	}

	for _, conv := range convs {
		if err := b.MarkRead(context.Background(), conv, 1); err != nil {
			t.Fatal(err)
		}
	}
	// One receipt fits the bucket, the others are refused for now: Flush
	// says so, with when chatd expects them.
	err := b.Flush(ctxFor(t, 10*time.Second))
	wantRetryAfter(t, "Flush of receipts over the read bucket", err, 2*time.Second)
	db := mustConn(t, url)
	read := func() (n int) {
		if err := db.QueryRow(context.Background(),
			`SELECT count(*) FROM conversation_member WHERE user_id = 2 AND conversation_id = ANY($1) AND last_read_seq = 1`, convs).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := read(); n == len(convs) {
		t.Fatalf("all %d receipts were taken at once: the test did not test", n)
	}
	// The commit comes before its PUBACK reaches the client: the count
	// of what it published is waited for too.
	testkit.WaitFor(t, 15*time.Second, "every receipt to be written and acknowledged once its retryAfter passed", func() bool {
		return read() == len(convs) && b.Stats().ReadsPublished >= int64(len(convs))
	})
	if n := b.Stats().ReadsPublished; n != int64(len(convs)) {
		t.Errorf("ReadsPublished = %d, want %d", n, len(convs))
	}
}
