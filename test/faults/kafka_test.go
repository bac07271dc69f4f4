package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

const kafkaTopic = "chat.events"

// startKafka starts kfake on port with chat.events (12 partitions, as
// chatd creates it); with dir, the log survives Close and is reloaded.
func startKafka(t *testing.T, port int, dir string) *kfake.Cluster {
	t.Helper()
	return kafkatest.Start(t, kfake.SeedTopics(12, kafkaTopic), kfake.Ports(port), kfake.DataDir(dir))
}

func outboxRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return pgtest.QueryOne[int](t, pool, `SELECT count(*) FROM outbox`)
}

// topicMessages reads chat.events from the start until it holds want
// message.new events, and returns each conversation's seqs in the order of
// its partition.
func topicMessages(t *testing.T, addr string, want int, within time.Duration) (map[int64][]int64, int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seqs := map[int64][]int64{}
	n, other := 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d message.new events from Kafka within %v", n, want, within)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var ev chat.Event
			if json.Unmarshal(r.Value, &ev) != nil || ev.Type != chat.EventMessageNew {
				other++
				return
			}
			if string(r.Key) != strconv.FormatInt(ev.ConversationID, 10) {
				t.Errorf("message.new of conversation %d keyed %q", ev.ConversationID, r.Key)
			}
			seqs[ev.ConversationID] = append(seqs[ev.ConversationID], ev.Seq)
			n++
		})
	}
	return seqs, other
}

// TestKafkaOutageLeavesChatUnaffectedAndOutboxDrainsInOrder: Kafka (kfake)
// is closed under load and a new one is started on the same port with the
// same log. Meanwhile sends are acknowledged and delivered locally as
// usual and the outbox keeps the events; afterwards it drains, and the
// topic holds every message.new of every conversation in seq order.
func TestKafkaOutageLeavesChatUnaffectedAndOutboxDrainsInOrder(t *testing.T) {
	port := testkit.FreePort(t)
	kafkaAddr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	k1 := startKafka(t, port, dir)

	url := pgtest.NewDB(t)
	srv := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafkaAddr, "CHAT_NODE_ID": "faults-kafka"})
	pool := openPool(t, url, 2)
	convs := createGroups(t, srv.Service, 3, "kafka ", []int64{2, 3, 4})
	addr := srv.MQTTAddr
	apps, away := outageAudience(t, "kafka-phone-", "returns after Kafka is back", addr)

	led := newLedger()
	s := newSender(device{user: 1, clientID: "kafka-sender", version: 5}, addr, led)
	sendSome := func(n int, what string) []time.Duration {
		var lat []time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			if _, err := s.send(t, convs[i%len(convs)], newID(), fmt.Sprintf("%s %d", what, i), time.Now().Add(30*time.Second)); err != nil {
				t.Fatalf("send %s %d: %v", what, i, err)
			}
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	sendSome(60, "before")
	testkit.WaitFor(t, 30*time.Second, "the outbox to be relayed before the outage", func() bool { return outboxRows(t, pool) == 0 })

	k1.Close() // Kafka goes away
	downAt := time.Now()
	lat := sendSome(150, "during")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	during := checkGapless(t, pool, convs)
	for _, u := range []int64{2, 3} {
		a := apps[u]
		testkit.WaitFor(t, 15*time.Second, fmt.Sprintf("user %d to receive the messages sent while Kafka is down", u), func() bool { return a.caughtUp(during) })
	}
	pending := outboxRows(t, pool)
	if pending < 150 {
		t.Errorf("outbox holds %d rows while Kafka is down, want at least the 150 message.new events", pending)
	}
	time.Sleep(time.Until(downAt.Add(3 * time.Second)))

	startKafka(t, port, dir) // back on the same port with the same log
	upAt := time.Now()
	sendSome(30, "after")
	testkit.WaitFor(t, 60*time.Second, "the outbox to drain after Kafka returned", func() bool { return outboxRows(t, pool) == 0 })
	drainedIn := time.Since(upAt)

	last := checkGapless(t, pool, convs)
	led.check(t, pool)
	var total int
	for _, l := range last {
		total += int(l)
	}
	seqs, other := topicMessages(t, kafkaAddr, total, 30*time.Second)
	dups := 0
	for _, conv := range convs {
		var have int64
		for _, seq := range seqs[conv] {
			switch {
			case seq <= have:
				dups++
			case seq == have+1:
				have = seq
			default:
				t.Errorf("Kafka: conversation %d has seq %d after %d (gap or reorder)", conv, seq, have)
				have = seq
			}
		}
		if have != last[conv] {
			t.Errorf("Kafka: conversation %d reaches seq %d, want %d", conv, have, last[conv])
		}
	}
	everyAppReceivesExactly(t, apps, away, addr, last, 15*time.Second)
	t.Logf("Kafka down %v: 150 sends all acknowledged (latency p50 %v, max %v) and delivered locally; %d outbox rows kept; drained %v after Kafka returned; topic holds all %d message.new events in seq order per conversation (%d duplicates, %d other events)",
		upAt.Sub(downAt).Round(time.Millisecond), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond),
		pending, drainedIn.Round(time.Millisecond), total, dups, other)
}
