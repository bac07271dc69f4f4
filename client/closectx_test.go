package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// TestCloseHonoursItsContextWhileAReadReceiptAwaitsItsPUBACK: the network
// stalls (a half-open connection, common on mobile: nothing comes back and
// nothing says the connection is gone) while the debounced read receipt
// waits for its PUBACK. Close with a short context must return when that
// context ends, not once the receipt's own RequestTimeout has run out.
func TestCloseHonoursItsContextWhileAReadReceiptAwaitsItsPUBACK(t *testing.T) {
	url := pgtest.NewDB(t)
	srv, broker := nodeOn(t, url)
	a := connect(t, testConfig(t, broker, 1))
	conv := direct(t, a, 2)
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2) // RequestTimeout 10s
	cfg.ReadDebounce = 10 * time.Millisecond
	b := connect(t, cfg)
	seq := sendN(t, a, conv, 1, "read me")[0]

	px.Stall()
	if err := b.MarkRead(context.Background(), conv, seq); err != nil {
		t.Fatal(err)
	}
	// chatd got the receipt: its PUBACK is what the stall swallows.
	db := mustConn(t, url)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var read int64
		if err := db.QueryRow(context.Background(),
			`SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv).Scan(&read); err != nil {
			t.Fatal(err)
		}
		if read >= seq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read receipt did not reach chatd within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_ = b.Close(ctx)
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("Close with a 1s context took %v", took.Round(time.Millisecond))
	}
}
