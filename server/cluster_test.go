package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

func startKafka(t *testing.T) string {
	t.Helper()
	c := kafkatest.Start(t, kfake.SeedTopics(12, "chat.events"), kfake.Ports(testkit.FreePort(t)))
	return c.ListenAddrs()[0]
}

// restartableKafka starts Kafka and returns its address, the cluster and
// a function that starts it again on the same port and log once the
// cluster was closed: a Kafka outage and its end.
func restartableKafka(t *testing.T) (addr string, k *kfake.Cluster, start func() *kfake.Cluster) {
	t.Helper()
	port, dir := testkit.FreePort(t), t.TempDir()
	start = func() *kfake.Cluster {
		return kafkatest.Start(t, kfake.SeedTopics(12, "chat.events"), kfake.Ports(port), kfake.DataDir(dir))
	}
	k = start()
	return k.ListenAddrs()[0], k, start
}

// startKafkaPair starts two nodes, named prefix+"a" and prefix+"b", on one
// fresh database and one Kafka, with extra on both: events one node
// commits reach the other only through Kafka.
func startKafkaPair(t *testing.T, prefix string, extra map[string]string) (a, b *server.Server) {
	t.Helper()
	url, kafka := pgtest.NewDB(t), startKafka(t)
	env := func(node string) map[string]string {
		e := map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": prefix + node}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	return startNode(t, url, env("a")), startNode(t, url, env("b"))
}

func buildChatd(t *testing.T) string {
	t.Helper()
	chatdBin.once.Do(func() {
		if chatdBin.dir, chatdBin.err = os.MkdirTemp("", "chatd-bin"); chatdBin.err != nil {
			return
		}
		chatdBin.path = filepath.Join(chatdBin.dir, "chatd")
		if out, err := exec.Command("go", "build", "-o", chatdBin.path, "../cmd/chatd").CombinedOutput(); err != nil {
			chatdBin.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if chatdBin.err != nil {
		t.Fatalf("build chatd: %v", chatdBin.err)
	}
	return chatdBin.path
}

// chatdBin is the chatd binary buildChatd builds once for the tests that
// run nodes as processes of their own (linking it takes seconds, many
// under load); TestMain removes its directory.
var chatdBin struct {
	once      sync.Once
	dir, path string
	err       error
}

// tracker records, per client, the first arrival of each seq and the
// publish->delivery latency carried in the body.
type tracker struct {
	mu      sync.Mutex
	order   []int64
	maxSeen int64
	dups    int
	lat     []time.Duration
}

func (tr *tracker) follow(c *mqtttest.Client, conv int64, measure bool) {
	go func() {
		for pk := range c.Publishes {
			var ev event
			if json.Unmarshal(pk.Payload, &ev) != nil || ev.Type != chat.EventMessageNew || ev.ConversationID != conv {
				continue
			}
			tr.mu.Lock()
			if ev.Seq <= tr.maxSeen {
				tr.dups++
			} else {
				tr.order = append(tr.order, ev.Seq)
				tr.maxSeen = ev.Seq
				if measure {
					if ns, err := strconv.ParseInt(strings.Fields(ev.Body)[0], 10, 64); err == nil {
						tr.lat = append(tr.lat, time.Since(time.Unix(0, ns)))
					}
				}
			}
			tr.mu.Unlock()
		}
	}()
}

func (tr *tracker) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.order)
}

func TestTwoNodesShareOneGroupAndClientsOfAKilledNodeResumeOnTheOther(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	kafka := startKafka(t)
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "node-a"})
	conv, err := a.Service.CreateGroup(context.Background(), 1, "cluster", []int64{2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	// Node B is a separate process so it can be killed with SIGKILL.
	bin := buildChatd(t)
	bAddr := testkit.FreeAddr(t)
	b := startProcess(t, bin, bAddr, os.Stderr, "CHAT_DATABASE_URL="+url, "CHAT_DATA_DIR="+t.TempDir(),
		"CHAT_KAFKA_BROKERS="+kafka, "CHAT_NODE_ID=node-b", "CHAT_LOG_LEVEL=warn")

	trackers := map[int64]*tracker{}
	clients := map[int64]*mqtttest.Client{}
	for u := int64(1); u <= 4; u++ {
		addr := a.MQTTAddr()
		if u >= 3 {
			addr = bAddr
		}
		v := byte(5)
		if u%2 == 0 {
			v = 4
		}
		clients[u] = rawClient(t, addr, u, fmt.Sprintf("cluster-%d", u), v, false)
		trackers[u] = &tracker{}
		trackers[u].follow(clients[u], conv.ID, u == 3)
	}
	// Kafka consumers start at the newest offset: let both join first.
	testkit.WaitFor(t, 30*time.Second, "cross-node delivery", func() bool {
		ack, err := clients[1].Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), fmt.Sprint(time.Now().UnixNano())+" warmup"))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("warm-up send: %v", err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if trackers[3].count() > 0 {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	})
	warm := int64(trackers[1].count())
	trackers[3].mu.Lock()
	trackers[3].lat = nil
	trackers[3].mu.Unlock()

	const total = 1000
	var wg sync.WaitGroup
	send := func(u int64, n int, addr func() string, killAt int) {
		defer wg.Done()
		c := clients[u]
		for i := 0; i < n; i++ {
			id := newID()
			for {
				ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(id, fmt.Sprintf("%d from %d", time.Now().UnixNano(), u)))
				if err == nil && ack.ReasonCode == 0 {
					break
				}
				// The node died under us: reconnect (to the survivor) and
				// resend with the same clientMsgId.
				time.Sleep(50 * time.Millisecond)
				nc, _, err := mqtttest.Dial(addr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("sender-%d", u), Password: testnode.Token(t, u), Clean: true})
				if err == nil {
					t.Cleanup(nc.Drop)
					c = nc
				}
			}
		}
	}
	var killOnce sync.Once
	killed := make(chan struct{})
	survivor := func() string { return a.MQTTAddr() }
	wg.Add(2)
	go send(1, total/2, survivor, -1)
	go func() {
		defer wg.Done()
		// User 3 (on node B) sends its half through a separate sender
		// connection so its listening client can be followed across the kill.
		sc := rawClient(t, bAddr, 3, "sender-3", 5, true)
		for i := 0; i < total/2; i++ {
			id := newID()
			for {
				ack, err := sc.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(id, fmt.Sprintf("%d from 3", time.Now().UnixNano())))
				if err == nil && ack.ReasonCode == 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
				nc, _, err := mqtttest.Dial(survivor(), mqtttest.Options{Version: 5, ClientID: "sender-3", Password: testnode.Token(t, 3), Clean: true})
				if err == nil {
					t.Cleanup(nc.Drop)
					sc = nc
				}
			}
			if i == total/4 {
				killOnce.Do(func() {
					_ = b.Process.Kill() // SIGKILL node B mid-exchange
					close(killed)
				})
			}
		}
	}()
	<-killed
	// B's listening clients reconnect to A with their persistent sessions.
	for _, u := range []int64{3, 4} {
		v := byte(5)
		if u%2 == 0 {
			v = 4
		}
		testkit.WaitFor(t, 10*time.Second, "B's client to notice", func() bool { return clients[u].Closed() })
		nc := rawClient(t, a.MQTTAddr(), u, fmt.Sprintf("cluster-%d", u), v, false)
		trackers[u].follow(nc, conv.ID, false)
	}
	wg.Wait()
	want := warm + total
	for u := int64(1); u <= 4; u++ {
		tr := trackers[u]
		testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("user %d to have all %d messages", u, want), func() bool { return int64(tr.count()) >= want })
		tr.mu.Lock()
		for i, seq := range tr.order {
			if seq != int64(i+1) {
				tr.mu.Unlock()
				t.Fatalf("user %d: message %d has seq %d: gap or reorder", u, i, seq)
			}
		}
		t.Logf("user %d: %d messages in order, %d duplicates dropped by seq", u, len(tr.order), tr.dups)
		tr.mu.Unlock()
	}
	lat := trackers[3].lat
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 10 {
		t.Logf("cross-node publish->delivery (node A sender -> node B member, %d samples before the kill): p50 %v p99 %v",
			len(lat), lat[len(lat)/2], lat[len(lat)*99/100])
	}
}

// A node that has just started serves its clients every message committed
// on another node from the moment it accepts them: its Kafka consumer's
// starting position is fixed before the node listens, not whenever its
// consumer group happens to be joined, so the first message of a quiet
// conversation is not left undelivered until the next one exposes the gap.
// Kafka holds the first join of a new group back by
// group.initial.rebalance.delay.ms (3 s by default); kfake is told to.
func TestANodeJustStartedDeliversTheFirstMessageFromAnotherNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	k := kafkatest.Start(t, kfake.SeedTopics(12, "chat.events"), kfake.Ports(testkit.FreePort(t)))
	var delayed atomic.Bool
	k.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.JoinGroupRequest).Group == "chatd-late-b" && delayed.CompareAndSwap(false, true) {
			k.SleepControl(func() { time.Sleep(3 * time.Second) })
		}
		return nil, nil, false
	})
	kafka := k.ListenAddrs()[0]
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "late-a"})
	conv := mustGroup(t, context.Background(), a, 1, "late", []int64{2})
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "late-b"})
	c := rawClient(t, b.MQTTAddr(), 2, "late-2", 5, false)
	mustSendAs(t, a, conv.ID, 1, "first")
	if ev := nextEvent(t, c, chat.EventMessageNew, 15*time.Second); ev.Body != "first" {
		t.Fatalf("delivered %+v", ev)
	}
}

// A node whose consumer could not fix its starting position at start-up
// (Kafka was unreachable then) still serves its clients every message
// another node committed since it accepted them: what was relayed before
// its new consumer group began reading is missed by the group, which starts
// where the partitions end, so the node fixes the position as soon as Kafka
// answers and has its sessions re-read PostgreSQL, which holds what was
// relayed before that. Here the pin at start-up fails, and both the second
// pin and the group's join are held until the message is in Kafka.
func TestANodeWhoseConsumerCouldNotPinAtStartStillDeliversWhatWasRelayedBeforeItJoined(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	k := kafkatest.Start(t, kfake.SeedTopics(12, "chat.events"), kfake.Ports(testkit.FreePort(t)))
	const group = "chatd-pinlate-b"
	relayed := make(chan struct{})
	var failed atomic.Bool
	k.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.OffsetCommitRequest).Group == group {
			k.DropControl()
			failed.Store(true)
			return nil, errors.New("the pin at start-up fails"), true
		}
		k.KeepControl()
		return nil, nil, false
	})
	// Once the pin failed, whatever the group does next waits for the
	// message to be in Kafka.
	hold := func(groups ...string) {
		if failed.Load() && slices.Contains(groups, group) {
			k.SleepControl(func() { <-relayed })
		}
	}
	k.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.OffsetFetchRequest)
		groups := []string{r.Group}
		for _, g := range r.Groups {
			groups = append(groups, g.Group)
		}
		hold(groups...)
		return nil, nil, false
	})
	k.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		hold(req.(*kmsg.JoinGroupRequest).Group)
		return nil, nil, false
	})
	kafka := k.ListenAddrs()[0]
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "pinlate-a"})
	conv := mustGroup(t, context.Background(), a, 1, "pinlate", []int64{2})
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "pinlate-b"})
	if !failed.Load() {
		t.Fatal("the pin at start-up did not fail")
	}
	c := rawClient(t, b.MQTTAddr(), 2, "pinlate-2", 5, false)
	mustSendAs(t, a, conv.ID, 1, "first")
	testkit.WaitFor(t, 15*time.Second, "the message relayed", func() bool {
		return pgtest.QueryOne[int](t, a.Pool, "SELECT count(*) FROM outbox") == 0
	})
	close(relayed)
	if ev := nextEvent(t, c, chat.EventMessageNew, 15*time.Second); ev.Body != "first" {
		t.Fatalf("delivered %+v", ev)
	}
}

// While Kafka is down, what one node commits waits in the outbox; once
// Kafka is back the outbox drains in order and the clients of the other
// nodes receive it live, without reconnecting (docs/operations.md, What
// each component guarantees).
func TestClientsOfAnotherNodeReceiveWhatWasSentWhileKafkaWasDownOnceItIsBack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	kafka, k, startLog := restartableKafka(t)
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "outage-a"})
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "outage-b"})
	conv := mustGroup(t, context.Background(), a, 1, "outage", []int64{2})
	c := rawClient(t, b.MQTTAddr(), 2, "outage-2", 5, false)
	send := func(body string) {
		t.Helper()
		mustSendAs(t, a, conv.ID, 1, body)
	}
	send("before")
	if ev := nextEvent(t, c, chat.EventMessageNew, 15*time.Second); ev.Body != "before" {
		t.Fatalf("delivered %+v", ev)
	}
	k.Close()
	for i := range 5 {
		send(fmt.Sprint("during ", i))
	}
	testkit.WaitFor(t, 10*time.Second, "the relay to notice that Kafka is down", func() bool {
		return pgtest.QueryOne[int](t, a.Pool, "SELECT count(*) FROM outbox") >= 5
	})
	startLog()
	for i := range 5 {
		if ev := nextEvent(t, c, chat.EventMessageNew, 15*time.Second); ev.Body != fmt.Sprint("during ", i) || ev.Seq != int64(i+2) {
			t.Fatalf("after Kafka returned, delivered %q (seq %d), want %q (seq %d)", ev.Body, ev.Seq, fmt.Sprint("during ", i), i+2)
		}
	}
}

// Two nodes with one node id would split the consumer group "chatd-<id>"
// (each getting half of the partitions), drop each other's events as their
// own (origin "chatd:<id>") and clear each other's presence marks: the
// second refuses to start, with a settings error (exit status 2), until
// the first stopped.
func TestASecondNodeWithTheSameNodeIDRefusesToStartWhileTheFirstRuns(t *testing.T) {
	t.Parallel()
	url, kafka := pgtest.NewDB(t), startKafka(t)
	env := map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "twin"}
	a := startNode(t, url, env)

	st, err := config.Load(nil, config.MapEnv(nodeEnv(t, url, env)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := server.Start(context.Background(), st, nil)
	if err == nil {
		_ = b.Close(context.Background())
		t.Fatal("a second node with node id twin started beside the first")
	}
	var bad *config.Error
	if !errors.As(err, &bad) || bad.Key != "node_id" || !strings.Contains(err.Error(), "CHAT_NODE_ID") {
		t.Fatalf("start error = %v, want a settings error about node_id naming CHAT_NODE_ID", err)
	}

	// Once the first stopped, the id is free: a restart is not refused.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	startNode(t, url, env)
}

// Outbox rows are written only while a relay may read them. A database
// that only nodes without Kafka used has them off; nodes with Kafka
// started on it turn them on before they accept clients, and relay every
// event committed after that: the clients of one get what the other
// commits, entries and receipts alike.
func TestKafkaNodesStartedWhereNoRelayWasRelayEveryEventCommittedAfterTheirStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs three chatd nodes and Kafka")
	}
	ctx := context.Background()
	url, kafka := pgtest.NewDB(t), startKafka(t)
	plain := startNode(t, url, map[string]string{"CHAT_NODE_ID": "norelay"})
	conv := mustGroup(t, ctx, plain, 1, "quiet", []int64{2})
	wanted := func(srv *server.Server) (on bool, rows int) {
		t.Helper()
		if err := srv.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox_wanted), (SELECT count(*) FROM outbox)`).Scan(&on, &rows); err != nil {
			t.Fatal(err)
		}
		return on, rows
	}
	if on, rows := wanted(plain); on || rows != 0 {
		t.Fatalf("without Kafka: outbox rows wanted %v, %d rows", on, rows)
	}

	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "relay-a"})
	b := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "relay-b"})
	if on, _ := wanted(a); !on {
		t.Fatal("a node with Kafka started: outbox rows not wanted")
	}
	c := rawClient(t, b.MQTTAddr(), 2, "quiet-2", 5, false)
	sent, err := a.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, c, chat.EventMessageNew, 15*time.Second); ev.Body != "first" {
		t.Fatalf("delivered %+v", ev)
	}
	if _, err := a.Service.React(ctx, chat.ReactionRequest{ConversationID: conv.ID, UserID: 1, ClientMsgID: newID(),
		TargetSeq: sent.Message.Seq, Emoji: "👍", On: true}); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, c, chat.EventReactionUpdated, 15*time.Second)
	// The plain node's writes are relayed too now.
	if _, err := plain.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "second"}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, c, chat.EventMessageNew, 15*time.Second); ev.Body != "second" {
		t.Fatalf("delivered %+v", ev)
	}
}

// A node skips the events it committed itself when they come back from
// Kafka (it delivered them in-process), also when its id is long: the
// outbox stamps a row with the committing session's application_name,
// which PostgreSQL keeps to 63 bytes. A marker another node published
// behind them, on their partition, says the consumer has read past them.
func TestANodeWithALongIDSkipsItsOwnEventsComingBackFromKafka(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a chatd node and Kafka")
	}
	url, kafka := pgtest.NewDB(t), startKafka(t)
	id := strings.Repeat("long-node-id-", 8) + "a" // 105 bytes, a valid node id
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": id})
	conv := mustGroup(t, context.Background(), a, 1, "long", []int64{2})
	mustSendAs(t, a, conv.ID, 1, "own")
	testkit.WaitFor(t, 10*time.Second, "the node's events relayed", func() bool {
		return pgtest.QueryOne[int](t, a.Pool, "SELECT count(*) FROM outbox") == 0
	})
	w := &kafkago.Writer{Addr: kafkago.TCP(kafka), Topic: "chat.events", Balancer: &kafkago.Hash{}}
	defer w.Close()
	marker, err := chat.EncodeEvent(chat.Event{Type: chat.EventTyping, ConversationID: conv.ID, UserID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(context.Background(), kafkago.Message{Key: []byte(strconv.FormatInt(conv.ID, 10)), Value: marker,
		Headers: []kafkago.Header{{Key: "type", Value: []byte(chat.EventTyping)}, {Key: "origin", Value: []byte("chatd:other")}}}); err != nil {
		t.Fatal(err)
	}
	handled := func() float64 { return unlabelled(t, a, "chat_kafka_consumer_events_total").GetCounter().GetValue() }
	testkit.WaitFor(t, 15*time.Second, "the marker handled", func() bool { return handled() >= 1 })
	if n := handled(); n != 1 {
		t.Fatalf("the node handled %v events from Kafka, want 1 (the marker): it took its own back", n)
	}
}

// chat.events is created with 12 partitions when it does not exist
// (docs/operations.md, Sizing Kafka partitions), also when Kafka was
// unreachable as the node started: the relay creates it before its first
// write, rather than the write having the broker create it with its
// default count (1 in Kafka's own configuration), which nothing changes
// afterwards.
func TestAChatEventsTopicMadeAfterKafkaWasUnreachableAtStartHasTwelvePartitions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a chatd node and Kafka")
	}
	url, port := pgtest.NewDB(t), testkit.FreePort(t)
	kafka := "127.0.0.1:" + strconv.Itoa(port)
	a := startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": "late-kafka"}) // nothing listens yet
	conv := mustGroup(t, context.Background(), a, 1, "late kafka", []int64{2})
	kafkatest.Start(t, kfake.Ports(port), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	mustSendAs(t, a, conv.ID, 1, "first")
	testkit.WaitFor(t, 30*time.Second, "the outbox relayed", func() bool {
		return pgtest.QueryOne[int](t, a.Pool, "SELECT count(*) FROM outbox") == 0
	})
	conn, err := kafkago.Dial("tcp", kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions("chat.events")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 12 {
		t.Fatalf("chat.events has %d partitions, want 12", len(parts))
	}
}
