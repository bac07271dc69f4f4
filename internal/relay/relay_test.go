package relay_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
)

func TestRelayPublishesEveryCommittedEventOnceInOrderPerConversation(t *testing.T) {
	pool := pgtest.NewPool(t)
	rl, port := runningRelay(t, pool)

	ev := newEvents(pool)
	convs := []int64{11, 12, 13, 14, 15}
	// 40 transactions of 1..6 interleaved events each: 200+ events over 5
	// conversations, more than one relay batch at a time.
	for i := 0; i < 40; i++ {
		var batch []int64
		for j := 0; j <= i%6; j++ {
			batch = append(batch, convs[rand.IntN(len(convs))])
		}
		ev.mustInsert(t, batch...)
		rl.Kick()
	}
	want, total := ev.counts()
	testkit.WaitFor(t, 10*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	msgs := readUntil(t, addr(port), total, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	if again, err := readTopic(context.Background(), addr(port)); err != nil || len(again) != total {
		t.Fatalf("Kafka holds %d messages (err %v), committed %d events", len(again), err, total)
	}
	d := checkMessages(t, msgs, want)
	if d.duplicates != 0 || len(msgs) != total {
		t.Fatalf("%d messages, %d duplicates, want %d and 0", len(msgs), d.duplicates, total)
	}
	// Event ids grow along each partition: the relay publishes in id order.
	last := map[int]int64{}
	for _, m := range msgs {
		e, _ := relay.DecodeEvent(m)
		if e.EventID <= last[m.Partition] {
			t.Fatalf("partition %d: eventId %d after %d", m.Partition, e.EventID, last[m.Partition])
		}
		last[m.Partition] = e.EventID
	}
}

func TestRelayKeepsRowsWhileKafkaIsDownAndDrainsThemInOrder(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := testkit.FreePort(t)
	dir := t.TempDir() // kfake persists here on Close and reloads on start
	k1 := startKafka(t, port, kfake.DataDir(dir))
	reg := prometheus.NewRegistry()
	rl := newRelay(t, pool, testConfig(t, port, reg))
	start(t, rl.Run)

	ev := newEvents(pool)
	convs := []int64{21, 22, 23, 24, 25, 26}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var insErr error
	wg.Add(1)
	go func() { // a steady stream of sends, one event per transaction
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := ev.insert(context.Background(), 0, convs[i%len(convs)]); err != nil {
				insErr = err
				return
			}
			rl.Kick()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	stopInserts := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	t.Cleanup(stopInserts)

	testkit.WaitFor(t, 10*time.Second, "100 events published", func() bool {
		return metric(t, reg, "chat_relay_published_total") >= 100
	})
	k1.Close() // Kafka goes away mid-stream
	publishedAtClose := metric(t, reg, "chat_relay_published_total")

	n0 := outboxCount(t, pool)
	testkit.WaitFor(t, 10*time.Second, "rows accumulating in the outbox", func() bool {
		return outboxCount(t, pool) >= n0+100
	})
	testkit.WaitFor(t, 5*time.Second, "Kafka errors counted and the backlog measured", func() bool {
		return metric(t, reg, "chat_relay_errors_total", "kind", "kafka") >= 1 &&
			metric(t, reg, "chat_relay_pending_rows") >= 50 &&
			metric(t, reg, "chat_relay_lag_seconds") > 0
	})
	if got := metric(t, reg, "chat_relay_published_total"); got > publishedAtClose+float64(50) {
		t.Fatalf("published %v rows while Kafka was down (%v at close)", got, publishedAtClose)
	}
	if got := metric(t, reg, "chat_relay_leader"); got != 1 {
		t.Fatalf("relay gave up the lease during a Kafka outage: leader=%v", got)
	}

	startKafka(t, port, kfake.DataDir(dir)) // Kafka is back, same address, same log
	time.Sleep(300 * time.Millisecond)      // sends continue during recovery
	stopInserts()
	if insErr != nil {
		t.Fatal(insErr)
	}
	testkit.WaitFor(t, 15*time.Second, "outbox drained after Kafka returned", func() bool { return outboxCount(t, pool) == 0 })

	want, total := ev.counts()
	msgs := readUntil(t, addr(port), total, 10*time.Second)
	d := checkMessages(t, msgs, want)
	t.Logf("%d events committed, %d messages in Kafka, %d duplicates from the outage", total, len(msgs), d.duplicates)
	if d.duplicates > 50 { // at most the batch in flight when Kafka died
		t.Fatalf("%d duplicates, want at most one batch", d.duplicates)
	}
}

func TestTwoRelaysPublishEachRowOnceAndTheStandbyTakesOver(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	cfgA, cfgB := testConfig(t, port, regA), testConfig(t, port, regB)
	cfgA.NodeID, cfgB.NodeID = "a", "b"
	a := newRelay(t, pool, cfgA)
	b := newRelay(t, pool, cfgB)
	runA := start(t, a.Run)
	testkit.WaitFor(t, 5*time.Second, "relay a leading", func() bool { return metric(t, regA, "chat_relay_leader") == 1 })
	start(t, b.Run)
	time.Sleep(300 * time.Millisecond) // b tried the lease several times
	if metric(t, regB, "chat_relay_leader") != 0 || b.Leading() {
		t.Fatal("both relays lead")
	}
	if !a.Leading() {
		t.Fatal("the leading relay does not say it leads")
	}

	ev := newEvents(pool)
	convs := []int64{31, 32, 33, 34}
	send := func(n int) {
		for i := 0; i < n; i++ {
			ev.mustInsert(t, convs[i%len(convs)], convs[(i+1)%len(convs)])
			a.Kick() // the committing node kicks its own relay
			b.Kick()
			time.Sleep(time.Millisecond)
		}
	}
	send(100)
	// Hand over while sends continue: a stops gracefully mid-stream.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); send(100) }()
	time.Sleep(20 * time.Millisecond)
	runA.stop(t)
	if metric(t, regA, "chat_relay_leader") != 0 || a.Leading() {
		t.Fatal("stopped relay still reports leading")
	}
	testkit.WaitFor(t, 5*time.Second, "relay b taking over", func() bool { return metric(t, regB, "chat_relay_leader") == 1 && b.Leading() })
	wg.Wait()
	send(50)

	testkit.WaitFor(t, 10*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	want, total := ev.counts()
	msgs := readUntil(t, addr(port), total, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	if again, _ := readTopic(context.Background(), addr(port)); len(again) != total {
		t.Fatalf("Kafka holds %d messages for %d committed events", len(again), total)
	}
	d := checkMessages(t, msgs, want)
	if d.duplicates != 0 {
		t.Fatalf("%d rows published twice", d.duplicates)
	}
	pa, pb := metric(t, regA, "chat_relay_published_total"), metric(t, regB, "chat_relay_published_total")
	if pa == 0 || pb == 0 || int(pa+pb) != total {
		t.Fatalf("published a=%v b=%v, want both > 0 and sum %d", pa, pb, total)
	}
}

func TestRelayWakesOnNotifyAndOnKickWithoutPolling(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, port, reg)
	cfg.PollInterval = time.Minute
	cfg.StatsInterval = time.Minute
	rl := newRelay(t, pool, cfg)
	start(t, rl.Run)
	testkit.WaitFor(t, 5*time.Second, "relay leading", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })
	time.Sleep(100 * time.Millisecond) // idle, waiting

	ev := newEvents(pool)
	ev.mustInsert(t, 41) // committed by "another node": no Kick, only NOTIFY
	testkit.WaitFor(t, 3*time.Second, "row published on NOTIFY", func() bool {
		return metric(t, reg, "chat_relay_published_total") == 1
	})

	if _, err := pool.Exec(context.Background(), "DROP TRIGGER outbox_notify ON outbox"); err != nil {
		t.Fatal(err)
	}
	ev.mustInsert(t, 41)
	time.Sleep(500 * time.Millisecond)
	if got := metric(t, reg, "chat_relay_published_total"); got != 1 {
		t.Fatalf("published %v without a wake-up, want 1", got)
	}
	rl.Kick()
	testkit.WaitFor(t, 3*time.Second, "row published on Kick", func() bool {
		return metric(t, reg, "chat_relay_published_total") == 2
	})
}

func TestRelayMetricsReportLagBacklogAndPublished(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := testkit.FreePort(t) // no Kafka yet
	reg := prometheus.NewRegistry()
	rl := newRelay(t, pool, testConfig(t, port, reg))
	start(t, rl.Run)
	testkit.WaitFor(t, 5*time.Second, "relay leading", func() bool { return metric(t, reg, "chat_relay_leader") == 1 })

	ev := newEvents(pool)
	if err := ev.insert(context.Background(), 30*time.Second, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1); err != nil {
		t.Fatal(err)
	}
	rl.Kick()
	testkit.WaitFor(t, 5*time.Second, "10 pending rows at least 30s old", func() bool {
		return metric(t, reg, "chat_relay_pending_rows") == 10 &&
			metric(t, reg, "chat_relay_lag_seconds") >= 30 &&
			metric(t, reg, "chat_relay_errors_total", "kind", "kafka") >= 1
	})
	if lag := metric(t, reg, "chat_relay_lag_seconds"); lag > 120 {
		t.Fatalf("lag %vs for rows 30s old", lag)
	}

	startKafka(t, port)
	testkit.WaitFor(t, 10*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	testkit.WaitFor(t, 5*time.Second, "lag gauges back to 0", func() bool {
		return metric(t, reg, "chat_relay_pending_rows") == 0 && metric(t, reg, "chat_relay_lag_seconds") == 0
	})
	const wantPublished = `
# HELP chat_relay_published_total Outbox rows published to Kafka and acknowledged by all in-sync replicas.
# TYPE chat_relay_published_total counter
chat_relay_published_total 10
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantPublished), "chat_relay_published_total"); err != nil {
		t.Fatal(err)
	}
	if n := metric(t, reg, "chat_relay_batch_size"); n < 1 || n > 10 {
		t.Fatalf("batch_size observed %v batches for 10 rows", n)
	}
	if n := metric(t, reg, "chat_relay_errors_total", "kind", "db"); n != 0 {
		t.Fatalf("db errors %v, want 0", n)
	}
	n, err := testutil.GatherAndCount(reg, "chat_relay_lag_seconds", "chat_relay_pending_rows",
		"chat_relay_published_total", "chat_relay_batch_size", "chat_relay_leader")
	if err != nil || n != 5 {
		t.Fatalf("gathered %d relay series (err %v), want 5", n, err)
	}
	if n := testutil.CollectAndCount(reg, "chat_relay_errors_total"); n != 5 {
		t.Fatalf("chat_relay_errors_total has %d kinds, want kafka, db, oversize, refused, decode", n)
	}
}

func TestRelayDropsRowTooLargeForKafkaAndKeepsGoing(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, port, reg)
	cfg.MaxBatchBytes = 4096
	rl := newRelay(t, pool, cfg)
	ev := newEvents(pool)
	ev.mustInsert(t, 51)
	big := `{"type":"message.new","conversationId":52,"seq":1,"body":"` + strings.Repeat("x", 8000) + `"}`
	if _, err := pool.Exec(context.Background(), "INSERT INTO outbox (msg_key, type, payload) VALUES ('52', $1::jsonb->>'type', $1::jsonb)", big); err != nil {
		t.Fatal(err)
	}
	ev.mustInsert(t, 51)
	start(t, rl.Run)
	testkit.WaitFor(t, 10*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	want, _ := ev.counts()
	checkMessages(t, readUntil(t, addr(port), 2, 5*time.Second), want)
	if n := metric(t, reg, "chat_relay_errors_total", "kind", "oversize"); n != 1 {
		t.Fatalf("oversize errors %v, want 1", n)
	}
}

// A topic whose max.message.bytes is below the relay's MaxBatchBytes (a
// managed Kafka's limit, a topic configured so) refuses a batch of many
// rows as a whole: the relay publishes them in smaller batches, and drops
// (counts as oversize) only a row the broker refuses on its own.
func TestRelayFitsItsBatchesToABrokerLimitBelowMaxBatchBytes(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := testkit.FreePort(t)
	startKafka(t, port, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "8192"}))
	reg := prometheus.NewRegistry()
	rl := newRelay(t, pool, testConfig(t, port, reg)) // MaxBatchBytes 1 MiB, 50 rows a batch
	ev := newEvents(pool)
	for range 3 { // 120 rows of one conversation, some 300 bytes each
		ev.mustInsert(t, slices.Repeat([]int64{61}, 40)...)
	}
	big := `{"type":"message.new","conversationId":62,"seq":1,"body":"` + strings.Repeat("x", 10000) + `"}`
	if _, err := pool.Exec(context.Background(), "INSERT INTO outbox (msg_key, type, payload) VALUES ('62', $1::jsonb->>'type', $1::jsonb)", big); err != nil {
		t.Fatal(err)
	}
	ev.mustInsert(t, 61, 61)
	start(t, rl.Run)
	testkit.WaitFor(t, 15*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	want, total := ev.counts()
	d := checkMessages(t, readUntil(t, addr(port), total, 5*time.Second), want)
	if d.duplicates != 0 {
		t.Fatalf("%d duplicates", d.duplicates)
	}
	if n := metric(t, reg, "chat_relay_errors_total", "kind", "oversize"); n != 1 {
		t.Fatalf("oversize errors %v, want 1", n)
	}
	if n := metric(t, reg, "chat_relay_published_total"); int(n) != total {
		t.Fatalf("published_total %v, want %d (the dropped row is not published)", n, total)
	}
}

func TestConsumerDeliversRelayedEventsToHandler(t *testing.T) {
	pool := pgtest.NewPool(t)
	rl, port := runningRelay(t, pool)

	reg := prometheus.NewRegistry()
	var got collector
	cons, err := relay.NewConsumer(relay.ConsumerConfig{
		Brokers:        []string{addr(port)},
		NodeID:         "n1",
		CommitInterval: 100 * time.Millisecond,
		BackoffMin:     20 * time.Millisecond,
		BackoffMax:     200 * time.Millisecond,
		Logger:         testLogger(t),
		Registerer:     reg,
		Handler:        got.handle,
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, cons.Run)
	count := func() int { return len(got.events()) }

	// A new group starts at the newest offset once it has joined: send
	// probes until the consumer sees one.
	ev := newEvents(pool)
	deadline := time.Now().Add(30 * time.Second)
	for count() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("consumer received no event within 30s")
		}
		ev.mustInsert(t, 999)
		rl.Kick()
		time.Sleep(200 * time.Millisecond)
	}

	convs := []int64{61, 62, 63}
	for i := 0; i < 30; i++ {
		ev.mustInsert(t, convs[i%3], convs[(i+1)%3])
		rl.Kick()
	}
	want, _ := ev.counts()
	wantConv := int(want[61] + want[62] + want[63])
	testkit.WaitFor(t, 15*time.Second, "all events handled", func() bool {
		n := 0
		for _, e := range got.events() {
			if e.ConversationID != 999 {
				n++
			}
		}
		return n >= wantConv
	})

	// Held through the metric check: the handler waits, so no event is
	// counted that the check has not seen.
	got.mu.Lock()
	defer got.mu.Unlock()
	all := got.evs
	last := map[int64]chat.Event{}
	for _, e := range all {
		if e.Type != chat.EventMessageNew || e.EventID == 0 || e.Body == nil || e.CreatedAt == nil {
			t.Fatalf("handler got incomplete event %+v", e)
		}
		p := last[e.ConversationID]
		if e.Seq <= p.Seq || e.EventID <= p.EventID {
			t.Fatalf("conversation %d: seq %d (event %d) after seq %d (event %d)", e.ConversationID, e.Seq, e.EventID, p.Seq, p.EventID)
		}
		last[e.ConversationID] = e
	}
	for _, c := range convs {
		if last[c].Seq != want[c] {
			t.Fatalf("conversation %d: handled up to seq %d, committed %d", c, last[c].Seq, want[c])
		}
	}
	if n := metric(t, reg, "chat_kafka_consumer_events_total"); int(n) != len(all) {
		t.Fatalf("events_total %v, handler got %d", n, len(all))
	}
	if n := metric(t, reg, "chat_kafka_consumer_errors_total", "kind", "decode"); n != 0 {
		t.Fatalf("decode errors %v", n)
	}
}

func TestEnsureTopicCreatesMissingTopicAndKeepsExistingOne(t *testing.T) {
	port := kafkaPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := relay.EnsureTopic(ctx, []string{addr(port)}, "chat.other", 4); err != nil {
		t.Fatal(err)
	}
	if err := relay.EnsureTopic(ctx, []string{addr(port)}, "chat.other", 4); err != nil {
		t.Fatalf("second EnsureTopic: %v", err)
	}
	if err := relay.EnsureTopic(ctx, []string{addr(port)}, topic, 8); err != nil {
		t.Fatalf("EnsureTopic on the seeded topic: %v", err)
	}
	conn, err := kafka.DialContext(ctx, "tcp", addr(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, want := range map[string]int{"chat.other": 4, topic: 3} {
		parts, err := conn.ReadPartitions(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != want {
			t.Fatalf("%s has %d partitions, want %d", name, len(parts), want)
		}
	}
}

func TestRunStopsOnCancelWithoutLeakingGoroutines(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	before := ourGoroutines()

	rl := newRelay(t, pool, testConfig(t, port, nil))
	cons, err := relay.NewConsumer(relay.ConsumerConfig{
		Brokers: []string{addr(port)}, NodeID: "leak", Handler: func(chat.Event) {}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := relay.NewPruner(pool, relay.PrunerConfig{Interval: 10 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	for _, run := range []func(context.Context) error{rl.Run, cons.Run, pr.Run} {
		go func() { done <- run(ctx) }()
	}
	ev := newEvents(pool)
	for i := 0; i < 20; i++ {
		ev.mustInsert(t, 71)
		rl.Kick()
	}
	readUntil(t, addr(port), 20, 10*time.Second)
	time.Sleep(200 * time.Millisecond)

	cancel()
	for i := 0; i < 3; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run returned %v after cancel", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return within 15s of cancel")
		}
	}
	if err := rl.Run(context.Background()); err == nil {
		t.Fatal("second Run of a relay succeeded")
	}

	var leaked []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		leaked = leaked[:0]
		for k, n := range ourGoroutines() {
			if n > before[k] {
				leaked = append(leaked, k)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Run returned:\n%s", strings.Join(leaked, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A consumer that falls behind shows it: chat_kafka_consumer_lag_events
// counts the events in Kafka its handler has not returned from, and goes
// back to 0 once it has caught up.
func TestConsumerLagCountsTheEventsNotYetHandled(t *testing.T) {
	pool := pgtest.NewPool(t)
	rl, port := runningRelay(t, pool)

	reg := prometheus.NewRegistry()
	release := make(chan struct{})
	var handled atomic.Int32
	cons := pinnedConsumer(t, port, relay.ConsumerConfig{NodeID: "lag", CommitInterval: 100 * time.Millisecond, Registerer: reg,
		Handler: func(chat.Event) {
			if handled.Add(1) == 2 {
				<-release // falls behind at the second event
			}
		},
	})
	ev := newEvents(pool)
	const n = 20
	convs := make([]int64, n)
	for i := range convs {
		convs[i] = 81
	}
	ev.mustInsert(t, convs...)
	rl.Kick()
	readUntil(t, addr(port), n, 10*time.Second)
	start(t, cons.Run)
	testkit.WaitFor(t, 10*time.Second, "the lag of a handler stuck at the second of 20 events", func() bool {
		return metric(t, reg, "chat_kafka_consumer_lag_events") == n-1
	})
	close(release)
	testkit.WaitFor(t, 10*time.Second, "the lag back to 0", func() bool {
		return handled.Load() == n && metric(t, reg, "chat_kafka_consumer_lag_events") == 0
	})
}

// Every kind of relay error is exported at 0 from the start, so that an
// alert on its rate works from its first occurrence; decode (a row that
// cannot be encoded, dropped) among them.
func TestRelayExportsEveryErrorKindAtZeroFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	newRelay(t, pgtest.NewPool(t), testConfig(t, testkit.FreePort(t), reg))
	for _, kind := range []string{"kafka", "db", "oversize", "refused", "decode"} {
		if n := metric(t, reg, "chat_relay_errors_total", "kind", kind); n != 0 {
			t.Fatalf("chat_relay_errors_total{kind=%q} = %v before anything ran", kind, n)
		}
	}
}

// A node restarted after chat.events was deleted and created again (to
// change its partition count) handles the new topic's events: deleting
// the topic took its group's offsets along, so the group starts afresh
// where Pin puts it. (A consumer that runs across the change waits until
// the new partitions pass the offsets it had reached: docs/operations.md
// says to restart the nodes.)
func TestAConsumerRestartedAfterTheTopicWasCreatedAgainHandlesTheNewTopicsEvents(t *testing.T) {
	pool := pgtest.NewPool(t)
	rl, port := runningRelay(t, pool)
	var handled atomic.Int32
	consumer := func() *relay.Consumer {
		t.Helper()
		return pinnedConsumer(t, port, relay.ConsumerConfig{NodeID: "recreated", CommitInterval: 50 * time.Millisecond,
			Handler: func(chat.Event) { handled.Add(1) }})
	}
	first := start(t, consumer().Run)
	ev := newEvents(pool)
	for range 10 {
		ev.mustInsert(t, 5)
		rl.Kick()
	}
	testkit.WaitFor(t, 10*time.Second, "10 events handled", func() bool { return handled.Load() == 10 })
	first.stop(t) // commits the offsets

	conn, err := kafka.Dial("tcp", addr(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.DeleteTopics(topic); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the topic created again", func() bool {
		return conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}) == nil
	})
	start(t, consumer().Run)
	for range 3 {
		ev.mustInsert(t, 5)
		rl.Kick()
	}
	testkit.WaitFor(t, 10*time.Second, "the new topic's 3 events handled", func() bool { return handled.Load() == 13 })
}

// A write Kafka refused logs one line that says what failed, not one copy
// of the broker's error per message: with a batch of hundreds of rows
// that copy ran to tens of kilobytes, one line that log pipelines cut.
func TestAFailedKafkaWriteLogsEachDistinctErrorOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := testkit.FreePort(t)
	cluster := startKafka(t, port)
	var refused atomic.Int32
	cluster.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Add(1) > 3 {
			cluster.DropControl()
			return nil, nil, false
		}
		cluster.KeepControl()
		return refuseProduce(req, 6), nil, true // NOT_LEADER_FOR_PARTITION
	})
	var logs logtest.Buffer
	cfg := testConfig(t, port, nil)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	rl := newRelay(t, pool, cfg)
	ev := newEvents(pool)
	ev.mustInsert(t, slices.Repeat([]int64{71}, 50)...) // one batch, one partition
	start(t, rl.Run)
	testkit.WaitFor(t, 15*time.Second, "outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "Kafka write failed") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no warning of the failed write in the log:\n%s", logs.String())
	}
	if n := strings.Count(line, "Not Leader For Partition"); n != 1 || len(line) > 1000 {
		t.Fatalf("the warning names the error %d times in %d bytes, want once:\n%s", n, len(line), line)
	}
}
