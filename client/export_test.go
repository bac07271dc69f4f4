package client

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// InjectEvent feeds a raw events-topic payload to the dispatcher, as if it
// had arrived from chatd: the seam of the de-duplication test.
func (c *Client) InjectEvent(payload []byte) { c.disp.enqueue(payload) }

// DropEvents makes the client drop events-topic payloads for which drop
// returns true, as a lossy path would (nil stops dropping).
func (c *Client) DropEvents(drop func(payload []byte) bool) {
	if drop == nil {
		c.dropEvent.Store(nil)
		return
	}
	c.dropEvent.Store(&drop)
}

// DropReplies makes the client drop RPC replies for which drop returns
// true, as a connection that ended before them would (nil stops).
func (c *Client) DropReplies(drop func(payload []byte) bool) {
	if drop == nil {
		c.dropReply.Store(nil)
		return
	}
	c.dropReply.Store(&drop)
}

// StripAckSeq removes the seq user property from the next n success
// PUBACKs of sends (n < 0: from all of them), as a server that strips
// properties would; StripAckSeq(0) stops.
func (c *Client) StripAckSeq(n int) {
	if n == 0 {
		c.ackHook.Store(nil)
		return
	}
	var mu sync.Mutex
	left := n
	h := func(resp *paho.PublishResponse) *paho.PublishResponse {
		mu.Lock()
		defer mu.Unlock()
		if resp.ReasonCode >= 0x80 || left == 0 {
			return resp
		}
		if left > 0 {
			left--
		}
		return &paho.PublishResponse{ReasonCode: resp.ReasonCode}
	}
	c.ackHook.Store(&h)
}

// SetNewConnectionHook runs f in New between starting the connection
// manager and recording it (nil removes it). Not safe for parallel tests.
func SetNewConnectionHook(f func()) { testHookNewConnection = f }

// SetReplyWaitHook runs f in every RPC between its PUBACK and the wait
// for its reply, with the end of its connection (nil removes it).
func SetReplyWaitHook(f func(method string, connDone <-chan struct{})) {
	if f == nil {
		testHookReplyWait.Store(nil)
		return
	}
	testHookReplyWait.Store(&f)
}

// HistoryFault, when it returns handled, answers one of the dispatcher's
// history calls (gap fills and catch-up) with msgs and err instead of
// asking chatd.
type HistoryFault func(conv int64, afterSeq int64) (msgs []Message, err error, handled bool)

// InjectHistoryFaults routes the dispatcher's history calls through f
// (nil stops).
func (c *Client) InjectHistoryFaults(f HistoryFault) {
	if f == nil {
		c.historyHook.Store(nil)
		return
	}
	h := func(conv int64, o HistoryOptions) ([]Message, error) {
		if msgs, err, handled := f(conv, o.AfterSeq); handled {
			return msgs, err
		}
		ctx, cancel := context.WithTimeout(c.life, c.cfg.RequestTimeout)
		defer cancel()
		return c.History(ctx, conv, o)
	}
	c.historyHook.Store(&h)
}

// CallOnce is an RPC the client does not ask again when its connection
// drops before the reply (a change a repeat would not answer as the
// first), whatever method names it: every such method of the API is
// made safe to ask again, so the rule is tested through this seam.
func (c *Client) CallOnce(ctx context.Context, method string, params any) error {
	return c.call(ctx, method, params, nil, false)
}

// Dial opens a connection to broker as the client's connection manager
// does for each attempt (dial), with tlsCfg as Config.TLS.
func Dial(ctx context.Context, broker string, tlsCfg *tls.Config) (net.Conn, error) {
	u, err := url.Parse(broker)
	if err != nil {
		return nil, err
	}
	return (&Client{}).dial(ctx, autopaho.ClientConfig{TlsCfg: tlsCfg}, u)
}

// ConnackBuffered is how many bytes a connection Dial opened holds to
// read the CONNACK from.
func ConnackBuffered(conn net.Conn) int { return len(conn.(*connackConn).buf) }

// WrapConn wraps conn as dial wraps each connection it opens.
func WrapConn(conn net.Conn) net.Conn { return &connackConn{Conn: conn, told: func(time.Duration) {}} }

// OnCatchUp runs f each time a persistent session's catch-up has applied
// its inbox read (what it forgets, what it has to fill), on the
// dispatcher's goroutine (nil stops).
func (c *Client) OnCatchUp(f func()) {
	if f == nil {
		c.catchUpHook.Store(nil)
		return
	}
	c.catchUpHook.Store(&f)
}

// OnSubscribed runs f each time a connection's subscriptions are
// acknowledged, before the connection is ready and its catch-up queued;
// events may arrive meanwhile (nil stops).
func (c *Client) OnSubscribed(f func()) {
	if f == nil {
		c.subscribedHook.Store(nil)
		return
	}
	c.subscribedHook.Store(&f)
}

// OnHandedOn runs f after each event is put on Events, on the
// dispatcher's goroutine, before it goes on (nil stops).
func (c *Client) OnHandedOn(f func(Event)) {
	if f == nil {
		c.handedHook.Store(nil)
		return
	}
	c.handedHook.Store(&f)
}
