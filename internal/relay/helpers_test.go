package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const topic = relay.DefaultTopic

// startKafka starts an in-process Kafka-protocol server on port with
// chat.events seeded with 3 partitions; extra options (such as
// kfake.DataDir) are appended. It is closed at the end of the test.
func startKafka(t *testing.T, port int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	return kafkatest.Start(t, append([]kfake.Opt{kfake.SeedTopics(3, topic), kfake.Ports(port)}, opts...)...)
}

// kafkaPort starts Kafka (startKafka) on a free port and returns the port.
func kafkaPort(t *testing.T) int {
	t.Helper()
	port := testkit.FreePort(t)
	startKafka(t, port)
	return port
}

// newRelay is relay.New, failing the test on error.
func newRelay(t *testing.T, pool *pgxpool.Pool, cfg relay.Config) *relay.Relay {
	t.Helper()
	rl, err := relay.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rl
}

// storeGroup is a database of the test's own, a store on it, closed at
// the end of the test, and a group "g" that user 1 created with user 2.
func storeGroup(t *testing.T) (*pgxpool.Pool, *store.Store, chat.Conversation) {
	t.Helper()
	pool := pgtest.NewPool(t)
	// As a node with Kafka turns them on before it writes.
	if err := store.WantOutboxRows(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	st := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	conv, _, err := st.CreateGroup(context.Background(), chat.GroupRequest{CreatorID: 1, Title: "g", Members: []int64{2}})
	if err != nil {
		t.Fatal(err)
	}
	return pool, st, conv
}

// runningRelay starts Kafka and a relay of pool's outbox (testConfig,
// no metrics registry); it returns the relay and Kafka's port.
func runningRelay(t *testing.T, pool *pgxpool.Pool) (*relay.Relay, int) {
	t.Helper()
	port := kafkaPort(t)
	rl := newRelay(t, pool, testConfig(t, port, nil))
	start(t, rl.Run)
	return rl, port
}

// relayEntries starts Kafka and a relay that encodes outbox rows from the
// entries they reference (as chatd runs it), kicks it and returns Kafka's
// port.
func relayEntries(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	port := kafkaPort(t)
	cfg := testConfig(t, port, nil)
	cfg.Entries = store.NewSessions(pool)
	rl := newRelay(t, pool, cfg)
	start(t, rl.Run)
	rl.Kick()
	return port
}

// checkRelayedAsLive reads Kafka (port) until it holds n messages and
// checks that the message.new of m among them is, byte for byte, the
// event m's commit published live (eventId aside).
func checkRelayedAsLive(t *testing.T, port, n int, m chat.Message) {
	t.Helper()
	live, err := chat.EncodeEvent(chat.EntryEvent(m.UTC()))
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range readUntil(t, addr(port), n, 10*time.Second) {
		var ev chat.Event
		if err := json.Unmarshal(msg.Value, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != chat.EventMessageNew || ev.Seq != m.Seq {
			continue
		}
		ev.EventID = 0
		kafka, _ := chat.EncodeEvent(ev)
		if string(kafka) != string(live) {
			t.Fatalf("message %d on Kafka\n  %s\nlive\n  %s", m.Seq, kafka, live)
		}
		return
	}
	t.Fatalf("no message.new of seq %d on Kafka", m.Seq)
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testConfig is a relay config with test-friendly timings.
func testConfig(t *testing.T, port int, reg prometheus.Registerer) relay.Config {
	return relay.Config{
		Brokers:       []string{addr(port)},
		NodeID:        "test",
		BatchSize:     50,
		PollInterval:  200 * time.Millisecond,
		LeaseInterval: 50 * time.Millisecond,
		StatsInterval: 50 * time.Millisecond,
		BackoffMin:    20 * time.Millisecond,
		BackoffMax:    200 * time.Millisecond,
		WriteTimeout:  3 * time.Second,
		Logger:        testLogger(t),
		Registerer:    reg,
	}
}

// pinnedConsumer is a consumer of cfg, with test-friendly back-offs and
// logger, pinned to where its group starts reading.
func pinnedConsumer(t *testing.T, port int, cfg relay.ConsumerConfig) *relay.Consumer {
	t.Helper()
	cfg.Brokers = []string{addr(port)}
	cfg.BackoffMin, cfg.BackoffMax, cfg.Logger = 20*time.Millisecond, 200*time.Millisecond, testLogger(t)
	cons, err := relay.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cons.Pin(ctx); err != nil {
		t.Fatal(err)
	}
	return cons
}

// runner runs a Run(ctx) method in a goroutine and stops it at cleanup.
type runner struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, run func(context.Context) error) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels and waits for Run; it may be called more than once.
func (r *runner) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("Run did not return within 15s of cancel")
	}
}

// events inserts outbox rows shaped as the store writes them: payload is a
// chat.Event message.new, msg_key the conversation id. It keeps each
// conversation's seq.
type events struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	seq  map[int64]int64
}

func newEvents(pool *pgxpool.Pool) *events { return &events{pool: pool, seq: map[int64]int64{}} }

// insert commits one transaction with one message.new per conversation in
// convs, in that order, created age ago.
func (e *events) insert(ctx context.Context, age time.Duration, convs ...int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := make([]string, len(convs))
	payloads := make([]string, len(convs))
	next := map[int64]int64{}
	for i, c := range convs {
		s := e.seq[c] + next[c] + 1
		next[c]++
		ev := chat.MessageEvent(chat.Message{
			ConversationID: c, Seq: s, SenderID: 7, ClientMsgID: uuid.NewString(),
			Body: fmt.Sprintf("hello %d/%d", c, s), CreatedAt: time.Now().UTC(),
		})
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		keys[i], payloads[i] = strconv.FormatInt(c, 10), string(b)
	}
	_, err := e.pool.Exec(ctx, `
		INSERT INTO outbox (msg_key, type, payload, created_at)
		SELECT k, p::jsonb->>'type', p::jsonb, now() - make_interval(secs => $3)
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(k, p, ord)
		ORDER BY ord`, keys, payloads, age.Seconds())
	if err != nil {
		return fmt.Errorf("insert outbox rows: %w", err)
	}
	for c, n := range next {
		e.seq[c] += n
	}
	return nil
}

func (e *events) mustInsert(t *testing.T, convs ...int64) {
	t.Helper()
	if err := e.insert(context.Background(), 0, convs...); err != nil {
		t.Fatal(err)
	}
}

// counts returns each conversation's last seq and the total.
func (e *events) counts() (map[int64]int64, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[int64]int64{}
	n := 0
	for c, s := range e.seq {
		out[c] = s
		n += int(s)
	}
	return out, n
}

func outboxCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return pgtest.QueryOne[int](t, pool, "SELECT count(*) FROM outbox")
}

// readTopic reads every message of every partition of topic.
func readTopic(ctx context.Context, address string) ([]kafka.Message, error) {
	return kafkatest.ReadTopic(ctx, address, topic, 3)
}

// readUntil polls the topic until it holds at least n messages.
func readUntil(t *testing.T, address string, n int, d time.Duration) []kafka.Message {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msgs, err := readTopic(context.Background(), address)
		if err == nil && len(msgs) >= n {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %d messages in Kafka: have %d, last error %v", d, n, len(msgs), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// delivered is what a consumer of the topic reconstructs.
type delivered struct {
	seqs       map[int64][]int64 // per conversation, in partition order
	duplicates int
}

// checkMessages checks the message envelope (key, headers, eventId) and
// that, per conversation, the first occurrences of seqs are exactly 1..want
// in order. It returns the number of duplicate deliveries.
func checkMessages(t *testing.T, msgs []kafka.Message, want map[int64]int64) delivered {
	t.Helper()
	d := delivered{seqs: map[int64][]int64{}}
	partOf := map[string]int{}
	byPart := map[int][]kafka.Message{}
	for _, m := range msgs {
		byPart[m.Partition] = append(byPart[m.Partition], m)
	}
	parts := make([]int, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Ints(parts)
	for _, p := range parts {
		ms := byPart[p]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Offset < ms[j].Offset })
		for _, m := range ms {
			ev, err := relay.DecodeEvent(m)
			if err != nil {
				t.Fatalf("partition %d offset %d: %v", m.Partition, m.Offset, err)
			}
			if ev.Type != chat.EventMessageNew || ev.EventID <= 0 || ev.Seq <= 0 {
				t.Fatalf("partition %d offset %d: bad event %+v", m.Partition, m.Offset, ev)
			}
			if got := string(m.Key); got != strconv.FormatInt(ev.ConversationID, 10) {
				t.Fatalf("key %q for conversation %d", got, ev.ConversationID)
			}
			if hp, ok := partOf[string(m.Key)]; ok && hp != m.Partition {
				t.Fatalf("conversation %s on partitions %d and %d", m.Key, hp, m.Partition)
			}
			partOf[string(m.Key)] = m.Partition
			hdr := map[string]string{}
			for _, h := range m.Headers {
				hdr[h.Key] = string(h.Value)
			}
			if hdr["type"] != chat.EventMessageNew || hdr["eventId"] != strconv.FormatInt(ev.EventID, 10) {
				t.Fatalf("headers %v for event %d", hdr, ev.EventID)
			}
			var raw map[string]any
			if err := json.Unmarshal(m.Value, &raw); err != nil || raw["eventId"] == nil || raw["body"] == nil {
				t.Fatalf("value is not the event JSON with eventId: %v", err)
			}
			d.seqs[ev.ConversationID] = append(d.seqs[ev.ConversationID], ev.Seq)
		}
	}
	for c, last := range want {
		seen := map[int64]bool{}
		var next int64 = 1
		for _, s := range d.seqs[c] {
			if seen[s] {
				d.duplicates++
				continue
			}
			if s != next {
				t.Fatalf("conversation %d: seq %d first seen where %d was due (sequence %v)", c, s, next, d.seqs[c])
			}
			seen[s] = true
			next++
		}
		if next-1 != last {
			t.Fatalf("conversation %d: delivered seqs 1..%d, committed 1..%d", c, next-1, last)
		}
	}
	if len(d.seqs) != len(want) {
		t.Fatalf("events for %d conversations, want %d", len(d.seqs), len(want))
	}
	return d
}

// metric returns the value of the named metric with the given label values
// (counter, gauge, or a histogram's sample count), failing if absent.
func metric(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

func labelsMatch(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// ourGoroutines counts the goroutines running kafka-go or relay code, by
// the function on top of their stack.
func ourGoroutines() map[string]int {
	out := map[string]int{}
	for _, g := range kafkatest.Stacks() {
		if !strings.Contains(g, "segmentio/kafka-go") && !strings.Contains(g, "chatd/chatd/internal/relay.") {
			continue
		}
		if strings.Contains(g, "relay_test.ourGoroutines") {
			continue
		}
		// Key by the function at the top of the stack (line 2).
		lines := strings.Split(g, "\n")
		key := g
		if len(lines) > 1 {
			key = lines[1]
		}
		out[key]++
	}
	return out
}

// collector is a consumer Handler that keeps every event it is given, in
// order; events returns a copy.
type collector struct {
	mu  sync.Mutex
	evs []chat.Event
}

func (c *collector) handle(e chat.Event) {
	c.mu.Lock()
	c.evs = append(c.evs, e)
	c.mu.Unlock()
}

func (c *collector) events() []chat.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chat.Event(nil), c.evs...)
}

// refuseProducesOf has cluster answer every produce request one of whose
// partitions' records match refused with code as the error of each of its
// partitions (refuseProduce), for the rest of the test.
func refuseProducesOf(cluster *kfake.Cluster, code int16, refused func(records []byte) bool) {
	cluster.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				if refused(rp.Records) {
					cluster.KeepControl()
					return refuseProduce(req, code), nil, true
				}
			}
		}
		return nil, nil, false
	})
}

// refuseProduce answers a produce request with code as the error of every
// partition it writes.
func refuseProduce(req kmsg.Request, code int16) *kmsg.ProduceResponse {
	r := req.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
