package delivery_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// noStore is a delivery store of users in no conversation.
type noStore struct{}

func (noStore) Cursors(context.Context, string, int64, bool) ([]chat.ConvCursor, error) {
	return nil, nil
}

func (noStore) SinceMany(context.Context, int64, []chat.Range, int) (map[int64][]chat.Message, error) {
	return nil, nil
}

func (noStore) SaveCursors(context.Context, []chat.Cursor) error { return nil }

func (noStore) Members(context.Context, int64) (chat.Routing, error) { return chat.Routing{}, nil }

type idleConn struct{}

func (idleConn) Write([]chat.Ack, []chat.Packet) error { return nil }
func (idleConn) Close(string)                          {}

// What the hub keeps for an online, idle session is memory every
// connected device holds (issue 24: at most 32 KiB a connection in all).
// Pinned here without the connection and the conversations' streams: the
// session, its place in the hub's indexes and what loading it leaves.
func TestAnIdleSessionOfItsOwnUserKeepsLittleInTheHub(t *testing.T) {
	h := delivery.NewHub(noStore{}, delivery.Options{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	const n = 5000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("idle-", i)
	}
	base := testkit.LiveHeap()
	// One at a time, so that each loads on an idle pump worker: a
	// goroutine started for one would leave its descriptor behind.
	for i, id := range ids {
		h.Attach(idleConn{}, id, int64(i+1), true, true, 0)
		testkit.Receive(t, h.Session(id).Loaded(), 10*time.Second, fmt.Sprintf("session %s never loaded", id))
	}
	testkit.WaitFor(t, 10*time.Second, "the pumps to go idle", func() bool {
		for _, id := range ids {
			if h.Session(id).Pumping() {
				return false
			}
		}
		return true
	})
	per := (testkit.LiveHeap() - base) / n
	runtime.KeepAlive(ids)
	t.Logf("%d bytes of heap per idle session", per)
	if per > 960 {
		t.Fatalf("%d bytes of heap per idle session, want at most 960", per)
	}
}
