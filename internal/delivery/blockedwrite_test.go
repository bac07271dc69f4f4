package delivery_test

import (
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/testkit"
)

// trickleConn is a client whose socket takes what it is sent too slowly
// for a write to end, while its TCP acknowledges more each time it is
// asked, as long as taking is set: Linux holds a blocked write back until
// a third of a send buffer of megabytes drained.
type trickleConn struct {
	*blockedConn
	acked  atomic.Uint64
	taking atomic.Bool
}

var _ chat.AckedConn = (*trickleConn)(nil)

func (c *trickleConn) Acked() (uint64, bool) {
	if c.taking.Load() {
		return c.acked.Add(1400), true
	}
	return c.acked.Load(), true
}

func TestAWriteBlockedWhileItsClientAcknowledgesMoreIsDisconnectedOnlyOnceItTakesNothing(t *testing.T) {
	f := setup(t)
	const slow = 300 * time.Millisecond
	h := newHub(t, f, delivery.Options{SlowTimeout: slow})
	c := &trickleConn{blockedConn: newBlockedConn()}
	c.taking.Store(true)
	t.Cleanup(func() { c.Close("test over") }) // before the hub closes
	attachConn(t, h, f, c, "trickle", 2, true, true)
	publishEach(h, f.send(t, 1))
	testkit.Receive(t, c.writing, 10*time.Second, "the session never wrote")
	closed := func() bool { return c.reason.Load() != nil }
	testkit.Never(t, 10*slow, "disconnected while its client's TCP acknowledged more of a blocked write", closed)
	c.taking.Store(false)
	stopped := time.Now()
	testkit.Receive(t, c.closed, 10*slow, "a client that takes nothing of a blocked write was not disconnected")
	t.Logf("disconnected %v after its client stopped taking: %v", time.Since(stopped).Round(time.Millisecond), c.reason.Load())
}
