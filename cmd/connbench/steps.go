package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/sync/errgroup"

	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/benchmqtt"
)

// setupChat mints a token per user and creates one direct conversation per
// pair through chatd's HTTP API.
func (b *bench) setupChat(ctx context.Context) error {
	tokens := make([]string, len(b.clients))
	for i, c := range b.clients {
		tok, err := auth.Mint(b.o.secret, c.user, 24*time.Hour)
		if err != nil {
			return fmt.Errorf("mint token: %w", err)
		}
		tokens[i] = tok
	}
	b.tokens = tokens
	hc := b.httpClient()
	return b.parallel(ctx, len(b.clients)/2, b.o.workers, func(p int) error {
		a, peer := b.clients[2*p], b.clients[2*p+1]
		var conv struct {
			ID int64 `json:"id"`
		}
		if err := b.o.Call(ctx, hc, b.tokens[a.idx], http.MethodPost, fmt.Sprintf("/v1/direct/%d", peer.user), nil, &conv); err != nil {
			return err
		}
		if conv.ID <= 0 {
			return fmt.Errorf("create conversation: no id in the reply")
		}
		a.conv, peer.conv = conv.ID, conv.ID
		return nil
	})
}

func (b *bench) httpClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: b.o.workers}}
}

// parallel runs fn(0..n-1) on workers goroutines; the first error stops
// the rest from starting.
func (b *bench) parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if gctx.Err() != nil {
			break // fn failed, or ctx ended
		}
		g.Go(func() error { return fn(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return context.Cause(ctx)
}

// paced runs fn for every client, started at rate per second (a client
// that cannot start on time waits its turn: at most 1,024 at once); it
// returns how many failed and the first error.
func (b *bench) paced(ctx context.Context, rate float64, fn func(ctx context.Context, c *client) error) (int, error) {
	sem := make(chan struct{}, 1024)
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		mu     sync.Mutex
		first  error
	)
	b.lat.reset()
	start := time.Now()
	for i, c := range b.clients {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			err := fn(ctx, c)
			b.lat.add(time.Since(t0))
			if err != nil {
				failed.Add(1)
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("user %d: %w", c.user, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil && first == nil {
		first = ctx.Err()
	}
	return int(failed.Load()), first
}

// dial opens c's session (clean: a fresh one), subscribing unless the
// server says the session is present; it reports whether it was.
func (b *bench) dial(ctx context.Context, c *client, clean bool) (present, subscribed bool, err error) {
	conn, present, subscribed, err := b.dialAs(ctx, c, fmt.Sprintf("connbench-%d", c.user), clean, func(pk packets.Packet) { b.received(c, pk) })
	if err == nil {
		c.conn.Set(conn)
	}
	return present, subscribed, err
}

// dialAs opens a session of c's user under clientID.
func (b *bench) dialAs(ctx context.Context, c *client, clientID string, clean bool, onPublish func(packets.Packet)) (_ *benchmqtt.Conn, present, subscribed bool, err error) {
	o := b.o
	opts := benchmqtt.Options{Version: 5, ClientID: clientID, CleanStart: clean,
		Expiry: 3600, KeepAlive: uint16(o.keepAlive), LocalAddr: c.source, BufferSize: 2048,
		OnPublish: onPublish}
	if !o.plain {
		opts.Username = strconv.FormatInt(c.user, 10)
		opts.Password = b.tokens[c.idx]
	}
	var conn *benchmqtt.Conn
	var ack packets.Packet
	for attempt := 0; ; attempt++ {
		conn, ack, err = benchmqtt.Dial(o.Broker, opts)
		if err == nil {
			break
		}
		b.retries.Add(1)
		if attempt >= 5 || ctx.Err() != nil {
			return nil, false, false, err
		}
		select {
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	present = ack.SessionPresent
	if clean || !present {
		topic := fmt.Sprintf("chat/v1/user/%d/events", c.user)
		if o.plain {
			topic = fmt.Sprintf("bench/pair/%d", c.pair)
		}
		if err := conn.Subscribe([]string{topic}); err != nil {
			conn.Drop()
			return nil, present, false, err
		}
		subscribed = true
	}
	return conn, present, subscribed, nil
}

// received records a delivery: chatd's message.new events of the pair's
// conversation, or the plain broker's {"seq":n} publishes.
func (b *bench) received(c *client, pk packets.Packet) {
	var ev struct {
		Type           string `json:"type"`
		ConversationID int64  `json:"conversationId"`
		Seq            int64  `json:"seq"`
	}
	if err := json.Unmarshal(pk.Payload, &ev); err != nil {
		c.other.Add(1)
		return
	}
	if !b.o.plain && (ev.Type != "message.new" || ev.ConversationID != c.conv) || ev.Seq < 1 || ev.Seq > 30 {
		c.other.Add(1)
		return
	}
	bit := uint32(1) << ev.Seq
	if c.got.Or(bit)&bit != 0 {
		c.dups.Add(1)
	}
}

func (b *bench) connectAll(ctx context.Context) (string, error) {
	failed, err := b.paced(ctx, b.o.connectRate, func(ctx context.Context, c *client) error {
		_, _, err := b.dial(ctx, c, true)
		return err
	})
	detail := fmt.Sprintf("%d of %d connected and subscribed (%s); %d connect attempts retried", len(b.clients)-failed, len(b.clients), b.lat.summary(), b.retries.Load())
	return detail, err
}

// messageOnline: the first of each pair sends one message; both members
// get it (chatd delivers a message to every member, the sender's own
// sessions included; plain subscribers of the pair's topic likewise).
func (b *bench) messageOnline(ctx context.Context) (string, error) {
	owedMask.Or(1 << 1)
	var refused atomic.Int64
	failed, err := b.paced(ctx, 2*b.o.connectRate, func(ctx context.Context, c *client) error {
		if c.idx%2 != 0 {
			return nil
		}
		conn := c.conn.Current()
		if conn == nil {
			return fmt.Errorf("not connected")
		}
		topic, payload := b.message(c, 1)
		done := make(chan error, 1)
		conn.Publish(topic, 1, payload, func(ack packets.Packet, err error) {
			if err == nil && ack.ReasonCode >= 0x80 {
				refused.Add(1)
				err = fmt.Errorf("PUBACK 0x%02x %s", ack.ReasonCode, ack.Properties.ReasonString)
			}
			done <- err
		})
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return fmt.Sprintf("%d publishes failed (%d refused)", failed, refused.Load()), err
	}
	err = b.waitAll(ctx)
	return fmt.Sprintf("%d messages acked; every client got its message: %v", len(b.clients)/2, err == nil), err
}

func (b *bench) message(c *client, seq int) (topic string, payload []byte) {
	if b.o.plain {
		return fmt.Sprintf("bench/pair/%d", c.pair), fmt.Appendf(nil, `{"seq":%d}`, seq)
	}
	return fmt.Sprintf("chat/v1/conv/%d/msg", c.conv), fmt.Appendf(nil, `{"clientMsgId":"%s","body":"hello %d"}`, uuid.NewString(), seq)
}

// disconnectAll sends DISCONNECT on every connection (sessions stay) and
// waits until the server has closed them all.
func (b *bench) disconnectAll(ctx context.Context) (string, error) {
	err := b.parallel(ctx, len(b.clients), 256, func(i int) error {
		c := b.clients[i]
		if conn := c.conn.Take(); conn != nil {
			conn.Disconnect()
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if err := b.mem.waitIdle(ctx, b.baseGoroutines); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d disconnected; the server reports no connection and holds %d open files", len(b.clients), b.mem.openFiles()), nil
}

// parkMore connects a second device of every user, subscribed like the
// first, and disconnects it: twice as many offline sessions, so the step's
// difference to the one before is what one more offline session costs,
// without the high-water marks (maps sized for N online clients) that
// the first disconnect leaves behind.
func (b *bench) parkMore(ctx context.Context) (string, error) {
	failed, err := b.paced(ctx, b.o.connectRate, func(ctx context.Context, c *client) error {
		conn, _, _, err := b.dialAs(ctx, c, fmt.Sprintf("connbench-%d-b", c.user), true, func(packets.Packet) {})
		if err != nil {
			return err
		}
		conn.Disconnect()
		return nil
	})
	if err != nil {
		return fmt.Sprintf("%d of %d second devices failed", failed, len(b.clients)), err
	}
	if err := b.mem.waitIdle(ctx, b.baseGoroutines); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d more sessions connected, subscribed and disconnected: %d offline", len(b.clients), 2*len(b.clients)), nil
}

// messageOffline: while everyone is offline, the first of each pair sends
// one more message (chatd: through the HTTP API; plain: from the extra
// publisher, which mochi queues for the offline subscribers).
func (b *bench) messageOffline(ctx context.Context) (string, error) {
	owedMask.Or(1 << 2)
	if b.o.plain {
		var wg sync.WaitGroup
		var failed atomic.Int64
		for p := range len(b.clients) / 2 {
			topic, payload := b.message(b.clients[2*p], 2)
			wg.Add(1)
			b.pub.Publish(topic, 1, payload, func(ack packets.Packet, err error) {
				if err != nil || ack.ReasonCode >= 0x80 {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			return "", fmt.Errorf("%d offline publishes failed", n)
		}
		return fmt.Sprintf("%d messages published for offline sessions", len(b.clients)/2), nil
	}
	hc := b.httpClient()
	err := b.parallel(ctx, len(b.clients)/2, b.o.workers, func(p int) error {
		c := b.clients[2*p]
		body := map[string]string{"clientMsgId": uuid.NewString(), "body": "while you were away"}
		return b.o.Call(ctx, hc, b.tokens[c.idx], http.MethodPost, fmt.Sprintf("/v1/conversations/%d/messages", c.conv), body, nil)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d messages sent through the HTTP API", len(b.clients)/2), nil
}

// resumeAll reconnects every session without clean start: a client whose
// session is present does not resubscribe (as real clients do not); each
// must then get the message it was owed.
func (b *bench) resumeAll(ctx context.Context) (string, error) {
	var present, resubscribed atomic.Int64
	failed, err := b.paced(ctx, b.o.connectRate, func(ctx context.Context, c *client) error {
		p, sub, err := b.dial(ctx, c, false)
		if p {
			present.Add(1)
		}
		if sub {
			resubscribed.Add(1)
		}
		return err
	})
	detail := fmt.Sprintf("%d of %d resumed (%s), %d with their session present (%d resubscribed)", len(b.clients)-failed, len(b.clients), b.lat.summary(), present.Load(), resubscribed.Load())
	if err != nil {
		return detail, err
	}
	if err := b.waitAll(ctx); err != nil {
		return detail, err
	}
	return detail + "; every client got the message it was owed", nil
}

// saveProfile writes a heap profile body to the profile dir.
func saveProfile(dir, name string, body []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(dir+"/"+name, body, 0o644)
}

// latencies are the durations of one paced step's calls.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) reset() {
	l.mu.Lock()
	l.d = l.d[:0]
	l.mu.Unlock()
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// summary is "p50/p99/max a/b/c ms" of each call (connect to SUBACK).
func (l *latencies) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return "no calls"
	}
	d := slices.Clone(l.d)
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	return fmt.Sprintf("each p50/p99/max %.1f/%.1f/%.1f ms", pct(0.5), pct(0.99), float64(d[len(d)-1].Microseconds())/1000)
}
