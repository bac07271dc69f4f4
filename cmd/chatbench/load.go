package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/sync/errgroup"

	"github.com/chatd/chatd/internal/benchmqtt"
	"github.com/chatd/chatd/internal/retry"
)

// bench is one run: the world, the clients and the books.
type bench struct {
	o       *options
	w       *world
	t       *tracker
	clients []*benchClient
	senders int // clients that are members of at least one conversation

	paused    atomic.Bool
	received  atomic.Int64 // publishes received, all types
	closing   atomic.Bool  // the run is over: publish no more read receipts
	phase     atomic.Int32
	rateBits  atomic.Uint64 // current target rate (msgs/s, all clients), 0 = as fast as acks allow
	budget    atomic.Int64  // messages left to send, when limited
	limited   bool          // -messages given
	sendStart time.Duration
}

func (b *bench) rate() float64     { return math.Float64frombits(b.rateBits.Load()) }
func (b *bench) setRate(r float64) { b.rateBits.Store(math.Float64bits(r)) }

// benchClient is one simulated user with one MQTT connection.
type benchClient struct {
	b    *bench
	idx  int32
	user int64

	conn benchmqtt.Slot

	slots   chan struct{} // in-flight publishes
	samples *samples
	rng     *rand.Rand
	body    string

	lastMu sync.Mutex
	last   map[int64]int64  // conversation -> highest seq received (gap detection)
	types  map[string]int64 // events received by type (under lastMu)
	newest map[int64]int64  // conversation -> newest message received (reaction target)
	own    map[int64]int64  // conversation -> this client's newest acknowledged message (edit target)
	react  map[int64]reactState
}

// reactState is a client's reaction in a conversation: on the newest
// message it set, it alternates, so every reaction changes something.
type reactState struct {
	target int64
	on     bool
}

func (b *bench) newClients() {
	b.clients = make([]*benchClient, len(b.w.users))
	for i, u := range b.w.users {
		c := &benchClient{b: b, idx: int32(i), user: u, slots: make(chan struct{}, b.o.inflight),
			samples: newSamples(), rng: rand.New(rand.NewPCG(b.o.seed, uint64(i)+1)), last: map[int64]int64{}, types: map[string]int64{},
			newest: map[int64]int64{}, own: map[int64]int64{}, react: map[int64]reactState{}}
		c.body = makeBody(fmt.Sprintf("bench user %d ", u), b.o.bodyBytes)
		b.clients[i] = c
		if len(b.w.byUser[i]) > 0 {
			b.senders++
		}
	}
}

func makeBody(prefix string, n int) string {
	if len(prefix) >= n {
		return prefix[:n]
	}
	return prefix + strings.Repeat("x", n-len(prefix))
}

func (c *benchClient) clientID() string { return fmt.Sprintf("bench-%d", c.user) }

// connect opens (or reopens, resuming the session) the connection and
// subscribes: to the events topic for chatd, to every conversation topic
// for a plain broker.
func (c *benchClient) connect(first bool) error {
	o := c.b.o
	do := benchmqtt.Options{Version: byte(o.mqttVersion), ClientID: c.clientID(), KeepAlive: 60, OnPublish: c.onPublish}
	if o.plain {
		do.CleanStart = first || !o.persistent
	} else {
		do.Username = strconv.FormatInt(c.user, 10)
		do.Password = c.b.w.tokens[c.idx]
		do.CleanStart = (first && o.mqttVersion == 5) || !o.persistent
	}
	if o.persistent && o.mqttVersion == 5 {
		do.Expiry = 600
	}
	conn, _, err := benchmqtt.Dial(o.Broker, do)
	if err != nil {
		return fmt.Errorf("user %d: %w", c.user, err)
	}
	var filters []string
	if o.plain {
		for _, ci := range c.b.w.byUser[c.idx] {
			filters = append(filters, plainTopic(c.b.w.convs[ci].id))
		}
	} else {
		filters = []string{fmt.Sprintf("chat/v1/user/%d/events", c.user)}
	}
	for len(filters) > 0 {
		n := min(len(filters), 100)
		if err := conn.Subscribe(filters[:n]); err != nil {
			conn.Drop()
			return fmt.Errorf("user %d: subscribe: %w", c.user, err)
		}
		filters = filters[n:]
	}
	c.conn.Set(conn)
	return nil
}

func plainTopic(conv int64) string { return "bench/conv/" + strconv.FormatInt(conv, 10) }

// drop cuts the connection as a lost network would.
func (c *benchClient) drop() {
	if conn := c.conn.Take(); conn != nil {
		conn.Drop()
		<-conn.Done()
	}
}

func (c *benchClient) close() {
	if conn := c.conn.Take(); conn != nil {
		conn.Disconnect()
	}
}

// event is the part of a chatd event the bench reads.
type event struct {
	Type           string `json:"type"`
	ConversationID int64  `json:"conversationId"`
	Seq            int64  `json:"seq"`
	SenderID       int64  `json:"senderId"`
	ClientMsgID    string `json:"clientMsgId"`
	Code           string `json:"code"`
}

// onPublish accounts for one incoming publish (reader goroutine).
func (c *benchClient) onPublish(pk packets.Packet) {
	t := c.b.t
	var ev event
	if err := decodeEvent(pk.Payload, &ev); err != nil {
		t.noteErr("bad payload")
		return
	}
	c.b.received.Add(1)
	c.lastMu.Lock()
	c.types[ev.Type]++
	c.lastMu.Unlock()
	if c.b.o.plain {
		if r, ok := t.byID.Load(ev.ClientMsgID); ok {
			t.delivery(r, c.idx, c.samples)
		} else {
			t.unknown.Add(1)
		}
		return
	}
	switch ev.Type {
	case "message.new", "message.edited", "reaction.updated":
		c.checkOrder(ev.ConversationID, ev.Seq)
		if ev.Type == "message.new" {
			c.lastMu.Lock()
			c.newest[ev.ConversationID] = max(c.newest[ev.ConversationID], ev.Seq)
			c.lastMu.Unlock()
		}
		var rec *msgRec
		if ev.ClientMsgID != "" {
			r, ok := t.byID.Load(ev.ClientMsgID)
			if !ok {
				t.unknown.Add(1)
				return
			}
			rec = r
		} else {
			r, ok := t.bySeqOrLater(convSeq{ev.ConversationID, ev.Seq}, c.idx, c.samples)
			if !ok {
				return // credited by its PUBACK
			}
			rec = r
		}
		rec.mu.Lock()
		if rec.seq == 0 {
			rec.seq = ev.Seq
		}
		rec.mu.Unlock()
		first := t.delivery(rec, c.idx, c.samples)
		if first && c.b.o.mode == modeReceipts && ev.SenderID != c.user && !c.b.closing.Load() {
			c.markRead(ev.ConversationID, ev.Seq)
		}
	case "read.updated":
		t.readUpdated.Add(1)
	case "error":
		t.errorEvents.Add(1)
		if r, ok := t.byID.Load(ev.ClientMsgID); ok && ev.ClientMsgID != "" {
			t.failed(r, "error event: "+ev.Code)
		} else {
			t.noteErr("error event: " + ev.Code)
		}
	}
}

// settle waits until the events caused by the setup (member.added for
// every member of every new conversation, presence) have been delivered:
// until nothing arrived for a second, at most d. Measuring before would
// put every message behind that backlog.
func (b *bench) settle(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	last, quietSince := b.received.Load(), time.Now()
	for ctx.Err() == nil && time.Now().Before(deadline) {
		retry.Sleep(ctx, 100*time.Millisecond)
		if n := b.received.Load(); n != last {
			last, quietSince = n, time.Now()
		} else if time.Since(quietSince) >= time.Second {
			return true
		}
	}
	return false
}

// eventTypes sums the events received by type over all clients.
func (b *bench) eventTypes() map[string]int64 {
	out := map[string]int64{}
	for _, c := range b.clients {
		c.lastMu.Lock()
		for k, v := range c.types {
			if k == "" {
				k = "(plain)"
			}
			out[k] += v
		}
		c.lastMu.Unlock()
	}
	return out
}

// checkOrder notes gaps: chatd delivers each conversation in seq order
// without holes, so a jump means lost messages. A seq at or below the last
// one is a redelivery, counted by the tracker.
func (c *benchClient) checkOrder(conv, seq int64) {
	c.lastMu.Lock()
	last := c.last[conv]
	if seq > last {
		c.last[conv] = seq
	}
	c.lastMu.Unlock()
	if seq > last+1 {
		c.b.t.gaps.Add(1)
		c.b.t.gapMessages.Add(seq - last - 1)
	}
}

// markRead publishes a read receipt at once (receipts mode).
func (c *benchClient) markRead(conv, seq int64) {
	conn := c.conn.Current()
	if conn == nil {
		c.b.t.readsFailed.Add(1)
		return
	}
	t := c.b.t
	sent := t.now()
	t.readsSent.Add(1)
	payload := []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `}`)
	conn.Publish("chat/v1/conv/"+strconv.FormatInt(conv, 10)+"/read", 1, payload, func(ack packets.Packet, err error) {
		if err != nil || ack.ReasonCode >= 0x80 {
			t.readsFailed.Add(1)
			return
		}
		t.readsAcked.Add(1)
		c.samples.mu.Lock()
		c.samples.read = append(c.samples.read, int64((t.now()-sent)/time.Microsecond))
		c.samples.mu.Unlock()
	})
}

// sendLoop publishes until ctx ends or the budget is spent: at the current
// rate (this client's share) or, at rate 0, as fast as -inflight allows.
func (c *benchClient) sendLoop(ctx context.Context) {
	convs := c.b.w.byUser[c.idx]
	if len(convs) == 0 {
		return
	}
	next := time.Now()
	if r := c.b.rate(); r > 0 {
		// Spread the clients' first sends over one interval: no burst at
		// the start of a run.
		interval := float64(time.Second) * float64(c.b.senders) / r
		next = next.Add(time.Duration(c.rng.Float64() * interval))
	}
	// One timer for the whole loop: a new one per message was measurable.
	pace := time.NewTimer(time.Hour)
	defer pace.Stop()
	for ctx.Err() == nil {
		if c.b.paused.Load() {
			retry.Sleep(ctx, 5*time.Millisecond)
			next = time.Now()
			continue
		}
		if r := c.b.rate(); r > 0 {
			interval := time.Duration(float64(time.Second) * float64(c.b.senders) / r)
			if d := time.Until(next); d > 0 {
				pace.Reset(d)
				select {
				case <-pace.C:
				case <-ctx.Done():
					return
				}
			}
			next = next.Add(interval)
			if behind := time.Since(next); behind > time.Second {
				next = time.Now() // do not burst to catch up on a long stall
			}
		}
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if c.b.limited && c.b.budget.Add(-1) < 0 {
			<-c.slots
			return
		}
		conn := c.conn.Current()
		if conn == nil {
			<-c.slots
			if c.b.limited {
				c.b.budget.Add(1)
			}
			retry.Sleep(ctx, 5*time.Millisecond)
			continue
		}
		c.publishOne(conn, c.b.w.convs[convs[c.rng.IntN(len(convs))]])
	}
}

func (c *benchClient) publishOne(conn *benchmqtt.Conn, conv conversation) {
	t := c.b.t
	id := uuid.NewString()
	kind, target, on := c.pickKind(conv.id)
	payload := make([]byte, 0, len(c.body)+96)
	payload = append(payload, `{"clientMsgId":"`...)
	payload = append(payload, id...)
	if kind != kindMessage {
		payload = append(payload, `","seq":`...)
		payload = strconv.AppendInt(payload, target, 10)
		payload = append(payload, `,"`...)
	} else {
		payload = append(payload, `","`...)
	}
	switch kind {
	case kindReaction:
		payload = append(payload, `emoji":"👍","on":`...)
		payload = strconv.AppendBool(payload, on)
		payload = append(payload, '}')
	default:
		payload = append(payload, `body":"`...)
		payload = append(payload, c.body...)
		payload = append(payload, `"}`...)
	}
	topic := plainTopic(conv.id)
	if !c.b.o.plain {
		topic = "chat/v1/conv/" + strconv.FormatInt(conv.id, 10) + [...]string{"/msg", "/edit", "/react"}[kind]
	}
	rec := &msgRec{conv: conv.id, sender: c.idx, phase: c.b.phase.Load(), expected: int32(len(conv.members)), kind: int8(kind)}
	t.published(id, rec)
	c.publishRec(conn, rec, topic, payload, 0)
}

// pickKind draws what the next publish in conv is (-edits, -reactions):
// an edit of this client's newest acknowledged message there, a reaction
// to the newest message it received there (set, or removed if it set it
// last time), or a message when there is nothing to edit or react to.
func (c *benchClient) pickKind(conv int64) (kind int, target int64, on bool) {
	o := c.b.o
	if o.edits+o.reactions == 0 {
		return kindMessage, 0, false
	}
	x := c.rng.Float64()
	c.lastMu.Lock()
	defer c.lastMu.Unlock()
	switch {
	case x < o.edits && c.own[conv] > 0:
		return kindEdit, c.own[conv], false
	case x >= o.edits && x < o.edits+o.reactions && c.newest[conv] > 0:
		st := c.react[conv]
		if st.target != c.newest[conv] {
			st = reactState{target: c.newest[conv], on: true}
		} else {
			st.on = !st.on
		}
		c.react[conv] = st
		return kindReaction, st.target, st.on
	}
	return kindMessage, 0, false
}

// publishRec publishes a message and settles it by its PUBACK. chatd's
// "unavailable" (0x80) and "internal" (0x83) mean "resend with the same
// clientMsgId", which it does, as a client would (counted as retried).
func (c *benchClient) publishRec(conn *benchmqtt.Conn, rec *msgRec, topic string, payload []byte, attempt int) {
	t := c.b.t
	conn.Publish(topic, 1, payload, func(ack packets.Packet, err error) {
		switch {
		case err != nil:
			<-c.slots
			t.lost(err)
		case (ack.ReasonCode == 0x80 || ack.ReasonCode == 0x83) && !c.b.o.plain && attempt < 20:
			t.retried.Add(1)
			t.noteRetry(fmt.Sprintf("PUBACK 0x%02x %s", ack.ReasonCode, ack.Properties.ReasonString))
			time.AfterFunc(time.Duration(attempt+1)*20*time.Millisecond, func() {
				next := c.conn.Current()
				if next == nil {
					<-c.slots
					t.lost(benchmqtt.ErrConnLost)
					return
				}
				c.publishRec(next, rec, topic, payload, attempt+1)
			})
		case ack.ReasonCode >= 0x80:
			<-c.slots
			t.failed(rec, fmt.Sprintf("PUBACK 0x%02x %s", ack.ReasonCode, ack.Properties.ReasonString))
		default:
			<-c.slots
			var seq int64
			for _, p := range ack.Properties.User {
				if p.Key == "seq" {
					seq, _ = strconv.ParseInt(p.Val, 10, 64)
				}
			}
			if rec.kind == kindMessage && seq > 0 {
				c.lastMu.Lock()
				c.own[rec.conv] = max(c.own[rec.conv], seq)
				c.lastMu.Unlock()
			}
			t.ackedMsg(rec, seq, c.samples)
		}
	})
}

// inflight reports this client's publishes awaiting a PUBACK.
func (c *benchClient) inflight() int { return len(c.slots) }

// connectAll connects every client, parallel at most n at a time.
func (b *bench) connectAll(ctx context.Context, n int, first bool) error {
	var g errgroup.Group
	g.SetLimit(n)
	for _, c := range b.clients {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			var err error
			for attempt := 0; attempt < 5; attempt++ {
				if err = c.connect(first); err == nil {
					return nil
				}
				retry.Sleep(ctx, time.Duration(attempt+1)*200*time.Millisecond)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// totalInflight is the number of publishes awaiting a PUBACK.
func (b *bench) totalInflight() int {
	n := 0
	for _, c := range b.clients {
		n += c.inflight()
	}
	return n
}

// waitAcks waits (up to d) for the in-flight publishes to settle.
func (b *bench) waitAcks(d time.Duration) {
	deadline := time.Now().Add(d)
	for b.totalInflight() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReads waits (up to d) for the read receipts in flight to settle.
func (b *bench) waitReads(d time.Duration) {
	deadline := time.Now().Add(d)
	for b.t.readsSent.Load() > b.t.readsAcked.Load()+b.t.readsFailed.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDelivered waits (up to d) until every acknowledged message reached
// all its members; it reports whether that happened.
func (b *bench) waitDelivered(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for b.t.pending() > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
