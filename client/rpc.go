package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/eclipse/paho.golang/paho"
)

// rpcTable matches replies to calls by Correlation Data: a prefix random
// per client, then a counter. Replies go to the client id's topic, which
// SessionDir keeps across runs, so a reply to a request of a previous run
// (one that closed or died before it came) may reach this one; with a
// counter alone it would answer this run's request of the same number.
type rpcTable struct {
	mu      sync.Mutex
	pending map[string]chan []byte
	prefix  [8]byte
	next    atomic.Uint64
}

// init readies an empty table.
func (t *rpcTable) init() {
	t.pending = map[string]chan []byte{}
	_, _ = rand.Read(t.prefix[:])
}

func (t *rpcTable) register() (string, chan []byte) {
	var b [16]byte
	copy(b[:8], t.prefix[:])
	binary.BigEndian.PutUint64(b[8:], t.next.Add(1))
	key := string(b[:])
	ch := make(chan []byte, 1)
	t.mu.Lock()
	t.pending[key] = ch
	t.mu.Unlock()
	return key, ch
}

func (t *rpcTable) forget(key string) {
	t.mu.Lock()
	delete(t.pending, key)
	t.mu.Unlock()
}

// deliver hands a reply to its caller; late or unknown replies are dropped.
func (t *rpcTable) deliver(corr, payload []byte) {
	t.mu.Lock()
	ch := t.pending[string(corr)]
	delete(t.pending, string(corr))
	t.mu.Unlock()
	if ch != nil {
		ch <- append([]byte(nil), payload...)
	}
}

// errConnectionLost: the connection dropped after the request was sent;
// whether the server ran it is unknown.
var errConnectionLost = &Error{Op: "rpc", Code: "unavailable", Message: "connection lost before the reply"}

// call runs an RPC method over MQTT v5 request/response and decodes the
// reply's body into out (nil: ignore it). Reads (idempotent) are re-sent
// when the connection drops before the reply; writes return an error that
// matches ErrUnavailable, since the server may or may not have run them.
func (c *Client) call(ctx context.Context, method string, params, out any, idempotent bool) error {
	payload, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", method, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	for {
		reply, err := c.roundTrip(ctx, method, payload)
		if errors.Is(err, errConnectionLost) && idempotent {
			continue
		}
		if err != nil {
			return err
		}
		return decodeReply(method, reply, out)
	}
}

// callFor is call with the reply decoded into a new T.
func callFor[T any](ctx context.Context, c *Client, method string, params any, idempotent bool) (T, error) {
	var out T
	err := c.call(ctx, method, params, &out, idempotent)
	return out, err
}

// roundTrip publishes one request and waits for its reply.
func (c *Client) roundTrip(ctx context.Context, method string, payload []byte) ([]byte, error) {
	cs, err := c.ready(ctx)
	if err != nil {
		return nil, c.waitErr("rpc "+method, err)
	}
	key, ch := c.rpc.register()
	defer c.rpc.forget(key)
	pb := &paho.Publish{
		QoS:     1,
		Topic:   "chat/v1/rpc/" + method,
		Payload: payload,
		Properties: &paho.PublishProperties{
			ResponseTopic:   c.rpcTopic,
			CorrelationData: []byte(key),
		},
	}
	if err := cs.tooLarge("rpc "+method, pb); err != nil {
		return nil, err
	}
	// paho waits for the PUBACK even if the connection dies: end the wait
	// with the connection.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(cs.ctx, cancel)
	defer stop()
	resp, err := cs.cm.Publish(pctx, pb)
	if resp != nil && resp.ReasonCode >= 0x80 {
		return nil, publishError("rpc "+method, resp)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, c.waitErr("rpc "+method, ctx.Err())
		}
		// paho's wait for the PUBACK may have ended with the connection
		// though the PUBACK, and the reply after it, came.
		if reply, ok := replied(cs, ch); ok {
			return reply, nil
		}
		return nil, errConnectionLost
	}
	if h := testHookReplyWait.Load(); h != nil {
		(*h)(method, cs.ctx.Done())
	}
	select {
	case reply := <-ch:
		return reply, nil
	case <-cs.ctx.Done():
		if reply, ok := replied(cs, ch); ok {
			return reply, nil
		}
		if c.life.Err() != nil {
			return nil, ErrClosed
		}
		return nil, errConnectionLost
	case <-ctx.Done():
		return nil, c.waitErr("rpc "+method, ctx.Err())
	}
}

// replied returns the reply in ch once the connection cs ended. paho
// hands every PUBLISH it read to onPublish before cs ends, so a reply
// written before chatd closed the connection (as it does right after
// answering tokens.revoke) is in ch by then, and a select on both picks
// either at random.
func replied(cs *connState, ch chan []byte) ([]byte, bool) {
	if cs.ctx.Err() == nil {
		return nil, false
	}
	select {
	case reply := <-ch:
		return reply, true
	default:
		return nil, false
	}
}

// testHookReplyWait, set by tests, runs in roundTrip between the request's
// PUBACK and the wait for its reply, with the connection's end.
var testHookReplyWait atomic.Pointer[func(method string, connDone <-chan struct{})]

// waitErr describes a wait that ended: closed, or the caller's context
// (wrapped with ErrUnavailable and the last connection failure, if any).
func (c *Client) waitErr(op string, err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	if stoppedBy(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	c.mu.Lock()
	last, up := c.lastErr, c.conn != nil
	c.mu.Unlock()
	if !up && last != nil {
		return fmt.Errorf("%s: %w: not connected (last attempt: %w): %w", op, ErrUnavailable, last, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// rpcStatus is the part of every reply the client looks at first.
type rpcStatus struct {
	Status int          `json:"status"`
	Error  *errorDetail `json:"error"`
}

func decodeReply(method string, reply []byte, out any) error {
	var st rpcStatus
	if err := json.Unmarshal(reply, &st); err != nil {
		return fmt.Errorf("decode %s reply: %w", method, err)
	}
	if st.Status >= 400 || st.Error != nil {
		e := &Error{Op: "rpc " + method, Status: st.Status, Code: "internal"}
		if st.Error != nil {
			e.fill(*st.Error)
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(reply, out); err != nil {
		return fmt.Errorf("decode %s reply: %w", method, err)
	}
	return nil
}
