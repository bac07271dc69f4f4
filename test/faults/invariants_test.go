package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// The invariants every fault scenario ends with:
//
//  1. every acknowledged message is stored exactly once, with the seq its
//     PUBACK carried (ledger.check);
//  2. seqs are gapless per conversation: last_seq = row count = max(seq)
//     (checkGapless);
//  3. every online or returning member received every message in order,
//     exactly once after de-duplication by (conversationId, seq) (app);
//  4. watermarks never moved back: last_read_seq, last_delivered_seq and
//     the sessions' delivered cursors (snapshotMarks, marks.notBehind).

// ackRec is what the sender learnt from a PUBACK.
type ackRec struct {
	conv int64
	seq  int64 // 0 when unknown (MQTT 3.1.1 PUBACKs carry no seq)
}

// ledger records acknowledged sends by clientMsgId.
type ledger struct {
	mu    sync.Mutex
	acked map[string]ackRec
}

func newLedger() *ledger { return &ledger{acked: map[string]ackRec{}} }

func (l *ledger) ack(id string, conv, seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.acked[id]; ok && prev.seq != 0 && seq != 0 && prev.seq != seq {
		panic(fmt.Sprintf("message %s acknowledged twice with different seqs %d and %d", id, prev.seq, seq))
	}
	if seq == 0 {
		seq = l.acked[id].seq
	}
	l.acked[id] = ackRec{conv, seq}
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// check asserts invariant 1 against the database.
func (l *ledger) check(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	convSet := map[int64]bool{}
	for _, r := range l.acked {
		convSet[r.conv] = true
	}
	var convs []int64
	for c := range convSet {
		convs = append(convs, c)
	}
	type row struct {
		conv, seq int64
		n         int
	}
	stored := map[string]row{}
	rows, err := pool.Query(context.Background(),
		`SELECT client_msg_id::text, conversation_id, seq FROM message WHERE conversation_id = ANY($1)`, convs)
	if err != nil {
		t.Fatalf("read messages: %v", err)
	}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.conv, &r.seq); err != nil {
			t.Fatal(err)
		}
		prev := stored[id]
		r.n = prev.n + 1
		stored[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, a := range l.acked {
		s, ok := stored[id]
		switch {
		case !ok:
			t.Errorf("acknowledged message %s (conversation %d, seq %d) is not stored", id, a.conv, a.seq)
		case s.n != 1:
			t.Errorf("acknowledged message %s is stored %d times", id, s.n)
		case s.conv != a.conv:
			t.Errorf("message %s stored in conversation %d, sent to %d", id, s.conv, a.conv)
		case a.seq != 0 && s.seq != a.seq:
			t.Errorf("message %s stored with seq %d but acknowledged with seq %d", id, s.seq, a.seq)
		}
	}
}

// checkGapless asserts invariant 2 and returns each conversation's last_seq.
func checkGapless(t *testing.T, pool *pgxpool.Pool, convs []int64) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	for _, conv := range convs {
		var last, rows, minSeq, maxSeq int64
		err := pool.QueryRow(context.Background(), `SELECT c.last_seq, count(m.seq), COALESCE(min(m.seq), 0), COALESCE(max(m.seq), 0)
			FROM conversation c LEFT JOIN message m ON m.conversation_id = c.id WHERE c.id = $1 GROUP BY c.last_seq`, conv).
			Scan(&last, &rows, &minSeq, &maxSeq)
		if err != nil {
			t.Fatalf("read conversation %d: %v", conv, err)
		}
		if last != rows || maxSeq != rows || (rows > 0 && minSeq != 1) {
			t.Errorf("conversation %d is not gapless: last_seq %d, %d rows, seqs %d..%d", conv, last, rows, minSeq, maxSeq)
		}
		out[conv] = last
	}
	return out
}

// marks are the watermarks: read and delivered per member, delivered cursor
// per session.
type marks map[string]int64

func snapshotMarks(t *testing.T, pool *pgxpool.Pool) marks {
	t.Helper()
	ctx := context.Background()
	m := marks{}
	rows, err := pool.Query(ctx, `SELECT conversation_id, user_id, last_read_seq, last_delivered_seq FROM member_watermark`)
	if err != nil {
		t.Fatalf("read watermarks: %v", err)
	}
	for rows.Next() {
		var conv, user, read, delivered int64
		if err := rows.Scan(&conv, &user, &read, &delivered); err != nil {
			t.Fatal(err)
		}
		m[fmt.Sprintf("read conv=%d user=%d", conv, user)] = read
		m[fmt.Sprintf("delivered conv=%d user=%d", conv, user)] = delivered
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `SELECT client_id, conversation_id, delivered_seq FROM session_cursor`)
	if err != nil {
		t.Fatalf("read cursors: %v", err)
	}
	for rows.Next() {
		var client string
		var conv, seq int64
		if err := rows.Scan(&client, &conv, &seq); err != nil {
			t.Fatal(err)
		}
		m[fmt.Sprintf("cursor client=%s conv=%d", client, conv)] = seq
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// notBehind asserts invariant 4: no watermark in after is lower than in m.
func (m marks) notBehind(t *testing.T, after marks) {
	t.Helper()
	for k, v := range m {
		if a, ok := after[k]; ok && a < v {
			t.Errorf("watermark moved back: %s from %d to %d", k, v, a)
		}
	}
}

// app is what a chat application sees on one device: message.new events
// de-duplicated by (conversationId, seq). A persistent session must never
// show a gap (seq > have+1) nor go backwards except as a duplicate.
type app struct {
	name       string
	mu         sync.Mutex
	have       map[int64]int64
	dups       int
	total      int
	violations []string
	lastAt     time.Time
}

func newApp(name string) *app { return &app{name: name, have: map[int64]int64{}} }

// start sets the position of conv (for members who join after messages
// were already sent).
func (a *app) start(conv, seq int64) {
	a.mu.Lock()
	a.have[conv] = seq
	a.mu.Unlock()
}

type wireEvent struct {
	Type           string `json:"type"`
	ConversationID int64  `json:"conversationId"`
	Seq            int64  `json:"seq"`
	Body           string `json:"body"`
	Code           string `json:"code"`
	Message        string `json:"message"`
}

func (a *app) handle(payload []byte) {
	var ev wireEvent
	if json.Unmarshal(payload, &ev) != nil || ev.Type != chat.EventMessageNew {
		return
	}
	a.offer(ev.ConversationID, ev.Seq)
}

func (a *app) offer(conv, seq int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	have := a.have[conv]
	switch {
	case seq <= have:
		a.dups++
	case seq == have+1:
		a.have[conv] = seq
		a.total++
		a.lastAt = time.Now()
	default:
		if len(a.violations) < 20 {
			a.violations = append(a.violations, fmt.Sprintf("conversation %d: got seq %d after %d (gap)", conv, seq, have))
		}
		a.have[conv] = seq
	}
}

// follow feeds c's events to the app until c closes; the returned channel
// closes when every buffered event was handled, so a reconnect can wait for
// the old connection's events before the new one's.
func (a *app) follow(c *mqtttest.Client) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pk := range c.Publishes {
			a.handle(pk.Payload)
		}
	}()
	return done
}

func (a *app) position(conv int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.have[conv]
}

// caughtUp reports whether the app has every conversation up to want.
func (a *app) caughtUp(want map[int64]int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for conv, last := range want {
		if a.have[conv] < last {
			return false
		}
	}
	return true
}

// assertExact asserts invariant 3 for this app: no violation and exactly
// want per conversation.
func (a *app) assertExact(t *testing.T, want map[int64]int64) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range a.violations {
		t.Errorf("%s: %s", a.name, v)
	}
	for conv, last := range want {
		if a.have[conv] != last {
			t.Errorf("%s: conversation %d at seq %d, want %d", a.name, conv, a.have[conv], last)
		}
	}
}

// liveDevice keeps one persistent device connected across faults: when the
// connection ends it waits for the old events to be handled, then
// reconnects (retrying while the server is away) and subscribes again.
type liveDevice struct {
	dev      device
	app      *app
	addr     func() string
	stop     atomic.Bool
	mu       sync.Mutex
	c        *mqtttest.Client
	connects atomic.Int64
	done     chan struct{}
}

// sendLoad starts one goroutine per sender (added to wg) that sends
// "load <sender>/<n>" to a random one of convs (seeded by seed) while
// more(n) holds, each send acknowledged within within, counting the
// acknowledged in sent. A failed send fails the test and stops its sender.
func sendLoad(t *testing.T, wg *sync.WaitGroup, senders []*sender, convs []int64, seed uint64, within time.Duration, sent *atomic.Int64, more func(n int) bool) {
	for i, s := range senders {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), seed))
			for n := 0; more(n); n++ {
				conv := convs[rnd.IntN(len(convs))]
				if _, err := s.send(t, conv, newID(), fmt.Sprintf("load %d/%d", i, n), time.Now().Add(within)); err != nil {
					t.Errorf("%s: message %d: %v", s.dev.clientID, n, err)
					return
				}
				sent.Add(1)
			}
		})
	}
}

// goAway opens d's persistent session and disconnects: what is sent to
// d's user from now on waits for it to return.
func (d device) goAway(t *testing.T, addr func() string) {
	t.Helper()
	d.mustConnect(t, addr(), 10*time.Second).Disconnect()
}

// outageAudience is who a fault is delivered through: users 2 (v5) and 3
// (v3.1.1) online throughout, and user 4 (v5), away (the device returned)
// while the fault lasts. Client ids start with prefix.
func outageAudience(t *testing.T, prefix, away string, addr func() string) (map[int64]*app, device) {
	t.Helper()
	apps := map[int64]*app{2: newApp("user 2 (v5, online)"), 3: newApp("user 3 (v3.1.1, online)"), 4: newApp("user 4 (v5, " + away + ")")}
	keepConnected(t, device{user: 2, clientID: prefix + "2", version: 5}, apps[2], addr)
	keepConnected(t, device{user: 3, clientID: prefix + "3", version: 4}, apps[3], addr)
	d := device{user: 4, clientID: prefix + "4", version: 5}
	d.goAway(t, addr)
	return apps, d
}

// everyAppReceivesExactly brings the away device back, waits up to within
// for every app to have each conversation up to last, and then, after a
// pause for whatever else might still arrive, asserts that each app has
// every message exactly once. It returns how long the catching up took.
func everyAppReceivesExactly(t *testing.T, apps map[int64]*app, away device, addr func() string, last map[int64]int64, within time.Duration) time.Duration {
	t.Helper()
	keepConnected(t, away, apps[away.user], addr)
	start := time.Now()
	for u, a := range apps {
		testkit.WaitFor(t, within, fmt.Sprintf("user %d to receive every message", u), func() bool { return a.caughtUp(last) })
	}
	caughtUp := time.Since(start)
	// Nothing more may arrive: exactly once after de-duplication.
	time.Sleep(200 * time.Millisecond)
	for _, a := range apps {
		a.assertExact(t, last)
	}
	return caughtUp
}

func keepConnected(t *testing.T, d device, a *app, addr func() string) *liveDevice {
	t.Helper()
	ld := &liveDevice{dev: d, app: a, addr: addr, done: make(chan struct{})}
	c := d.mustConnect(t, addr(), 30*time.Second)
	ld.c = c
	ld.connects.Add(1)
	go ld.run(t, c)
	t.Cleanup(ld.close)
	return ld
}

func (ld *liveDevice) run(t *testing.T, c *mqtttest.Client) {
	defer close(ld.done)
	for {
		<-ld.app.follow(c)
		if ld.stop.Load() {
			return
		}
		for {
			if ld.stop.Load() {
				return
			}
			nc, err := ld.dev.connect(t, ld.addr())
			if err == nil {
				c = nc
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		ld.mu.Lock()
		ld.c = c
		ld.mu.Unlock()
		ld.connects.Add(1)
		if ld.stop.Load() {
			c.Drop()
		}
	}
}

func (ld *liveDevice) client() *mqtttest.Client {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.c
}

func (ld *liveDevice) close() {
	if ld.stop.Swap(true) {
		return
	}
	ld.client().Drop()
	select {
	case <-ld.done:
	case <-time.After(10 * time.Second):
	}
}

// sender publishes through its own connection and resends each message with
// the same clientMsgId until it is acknowledged: the client side of "acked
// means committed". It records every PUBACK reason code and every
// connection lost without a PUBACK.
type sender struct {
	dev    device
	addr   func() string
	led    *ledger
	c      *mqtttest.Client
	mu     sync.Mutex
	codes  map[byte]int // v5 PUBACK reason codes of failed attempts
	noAck  int          // attempts that ended with the connection closed, no PUBACK
	okAcks int
	// connRefused counts CONNACK refusals by reason code while reconnecting.
	connRefused map[byte]int
}

func newSender(d device, addr func() string, led *ledger) *sender {
	return &sender{dev: d, addr: addr, led: led, codes: map[byte]int{}, connRefused: map[byte]int{}}
}

// mixedSenders makes a sender recording into led for each of users, the
// last on MQTT 3.1.1 and the others on MQTT 5, so that a load speaks both
// versions; their client ids are prefix+"-sender-<user>".
func mixedSenders(prefix string, addr func() string, led *ledger, users ...int64) []*sender {
	senders := make([]*sender, len(users))
	for i, u := range users {
		version := byte(5)
		if i == len(users)-1 {
			version = 4
		}
		senders[i] = newSender(device{user: u, clientID: fmt.Sprintf("%s-sender-%d", prefix, u), version: version}, addr, led)
	}
	return senders
}

var errGaveUp = errors.New("gave up")

// send delivers one message, retrying until deadline; it returns the seq
// (0 for MQTT 3.1.1).
func (s *sender) send(t *testing.T, conv int64, id, body string, deadline time.Time) (int64, error) {
	for {
		if time.Now().After(deadline) {
			return 0, errGaveUp
		}
		if s.c == nil || s.c.Closed() {
			c, connack, err := mqtttest.Dial(s.addr(), mqtttest.Options{Version: s.dev.version, ClientID: s.dev.clientID,
				Password: testnode.Token(t, s.dev.user), Clean: true, ReadBuffer: 64})
			if err != nil {
				if connack.ReasonCode != 0 {
					s.mu.Lock()
					s.connRefused[connack.ReasonCode]++
					s.mu.Unlock()
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			s.c = c
			t.Cleanup(c.Drop)
		}
		ack, err := s.c.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(id, body))
		if err != nil {
			s.mu.Lock()
			s.noAck++
			s.mu.Unlock()
			s.c.Drop()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if ack.ReasonCode >= 0x80 {
			s.mu.Lock()
			s.codes[ack.ReasonCode]++
			s.mu.Unlock()
			if ack.ReasonCode != 0x80 && ack.ReasonCode != 0x83 {
				return 0, fmt.Errorf("send refused with 0x%02x %q", ack.ReasonCode, ack.Properties.ReasonString)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var seq int64
		if v := userProp(ack.Properties.User, "seq"); v != "" {
			seq, _ = strconv.ParseInt(v, 10, 64)
		}
		s.led.ack(id, conv, seq)
		s.mu.Lock()
		s.okAcks++
		s.mu.Unlock()
		return seq, nil
	}
}

func (s *sender) stats() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var codes []string
	for c, n := range s.codes {
		codes = append(codes, fmt.Sprintf("0x%02x×%d", c, n))
	}
	sort.Strings(codes)
	var refused []string
	for c, n := range s.connRefused {
		refused = append(refused, fmt.Sprintf("0x%02x×%d", c, n))
	}
	sort.Strings(refused)
	return fmt.Sprintf("v%d sender %s: %d acked; PUBACK refusals %v; %d connections closed without PUBACK; CONNACK refusals while reconnecting %v",
		s.dev.version, s.dev.clientID, s.okAcks, codes, s.noAck, refused)
}
