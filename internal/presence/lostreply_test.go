package presence_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// cutter cuts a pool's connection once armed: the first reply that
// comes after is read off the socket, then the socket is closed and the
// reply lost. PostgreSQL sends a statement's reply once it committed it.
type cutter struct {
	armed atomic.Bool
	cuts  atomic.Int64
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, cutter: c}, nil
}

type cutConn struct {
	net.Conn
	cutter *cutter
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.cutter.armed.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
		c.cutter.cuts.Add(1)
		return 0, errors.New("connection cut before the reply was read")
	}
	return n, err
}

// replyLost is stalled whose next heartbeat, once loseNext is set,
// commits and loses its reply: its connection is cut (cutter) after the
// commit, before the reply is read.
type replyLost struct {
	stalled
	cutter   *cutter
	loseNext atomic.Bool
}

func (r *replyLost) Heartbeat(ctx context.Context, node string) (bool, error) {
	if !r.stalled.stalled.Load() && r.loseNext.CompareAndSwap(true, false) {
		r.cutter.armed.Store(true)
	}
	return r.stalled.Heartbeat(ctx, node)
}

// TestARevivalWhoseHeartbeatReplyIsLostIsAnnouncedAtTheNextHeartbeat:
// node a was taken for dead and its users announced offline. The
// heartbeat that records it alive again commits, but its reply is lost
// (the connection cut after the commit). Its users, connected to it all
// along, must be announced online again at a later heartbeat: that one
// found the node's heartbeat recorded, and they stayed offline to their
// watchers for good.
func TestARevivalWhoseHeartbeatReplyIsLostIsAnnouncedAtTheNextHeartbeat(t *testing.T) {
	cut := &cutter{}
	// One connection, which the statements are prepared on before the cut
	// (a statement's preparation would be the reply cut), never pinged.
	pool := newPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		cfg.ConnConfig.DialFunc = cut.dial
	})
	pr := store.NewPresence(pool, presence.TTL(200*time.Millisecond))
	a := &replyLost{stalled: stalled{severed: severed{refusing: refusing{beating: beating{stored: pr}}}}, cutter: cut}
	var onA published
	tr := startTracker(t, presence.Config{NodeID: "a", Store: a, Hub: nopHub{}, Heartbeat: 200 * time.Millisecond,
		Grace: 100 * time.Millisecond, Publish: onA.add})
	connector(t, store.NewSessions(pool), tr)("one", "a/1/1", 1)
	testkit.WaitFor(t, 5*time.Second, "user 1 announced online", func() bool { return len(onA.about(1)) == 1 })

	a.stalled.stalled.Store(true)
	reap(t, pool, pr, 1)
	a.loseNext.Store(true)
	a.stalled.stalled.Store(false)
	testkit.WaitFor(t, 5*time.Second, "the reply of node a's heartbeat to be lost", func() bool { return cut.cuts.Load() == 1 })
	beats := a.beats.Load()
	testkit.WaitFor(t, 5*time.Second, "three more heartbeats", func() bool { return a.beats.Load() >= beats+3 })
	if got := states(onA.about(1)); got != "online online" {
		t.Errorf("user 1, announced offline by the reaper, announced %s by node a; want online online", got)
	}
	if p, err := tr.Presence(context.Background(), 1); err != nil || !p.Online {
		t.Errorf("presence of user 1: %+v, %v; want online", p, err)
	}
}
