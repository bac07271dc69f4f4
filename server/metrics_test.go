package server_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// scrape returns the metric samples of /metrics keyed by name{labels}.
func scrape(t *testing.T, httpAddr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func TestMetricsExposeTrafficRelayAndPool(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, map[string]string{"CHAT_KAFKA_BROKERS": startKafka(t), "CHAT_NODE_ID": "metrics"})
	a := rawClient(t, srv.MQTTAddr(), 1, "m1", 5, true)
	b := rawClient(t, srv.MQTTAddr(), 2, "m2", 4, true)
	sendN(t, a, conv.ID, 10, "m")
	collectMessages(t, b, conv.ID, 10, 10*time.Second)
	// The sender's own echoes count as deliveries too; scraping before
	// they were written read 14 of 20 once.
	collectMessages(t, a, conv.ID, 10, 10*time.Second)
	if ack, _ := a.Publish(testnode.MsgTopic(999), 1, testnode.SendPayload(newID(), "x")); ack.ReasonCode != 0x87 {
		t.Fatalf("unexpected 0x%02x", ack.ReasonCode)
	}
	var m map[string]float64
	testkit.WaitFor(t, 20*time.Second, "relay to publish the events", func() bool {
		m = scrape(t, srv.HTTPAddr())
		return m["chat_relay_published_total"] >= 10
	})
	checks := map[string]func(float64) bool{
		`chat_mqtt_connections`:                                     func(v float64) bool { return v == 2 },
		`chat_mqtt_publishes_total{kind="msg",outcome="ok"}`:        func(v float64) bool { return v == 10 },
		`chat_mqtt_publishes_total{kind="msg",outcome="not_found"}`: func(v float64) bool { return v == 1 },
		`chat_send_seconds_count`:                                   func(v float64) bool { return v == 11 },
		`chat_delivery_latency_seconds_count`:                       func(v float64) bool { return v >= 20 },
		`chat_sessions_online`:                                      func(v float64) bool { return v == 2 },
		`chat_pg_pool_max_conns`:                                    func(v float64) bool { return v > 0 },
		`chat_send_batched_total`:                                   func(v float64) bool { return v >= 10 && v <= 11 },
		`chat_send_batches_total`:                                   func(v float64) bool { return v >= 1 && v <= m["chat_send_batched_total"] },
		`chat_send_queued`:                                          func(v float64) bool { return v == 0 },
		`chat_relay_leader`:                                         func(v float64) bool { return v == 1 },
		`chat_relay_lag_seconds`:                                    func(v float64) bool { return v >= 0 && v < 60 },
		`chat_slow_consumer_disconnects_total`:                      func(v float64) bool { return v == 0 },
		`chat_delivery_queue_overflows_total`:                       func(v float64) bool { return v == 0 },
		`chat_mqtt_connects_total{outcome="ok"}`:                    func(v float64) bool { return v >= 2 },
		`process_resident_memory_bytes`:                             func(v float64) bool { return v > 0 },
	}
	for name, ok := range checks {
		v, present := m[name]
		if !present || !ok(v) {
			t.Errorf("%s = %v (present %v)", name, v, present)
		}
	}
	found := false
	for k := range m {
		if strings.HasPrefix(k, "chat_relay_errors_total") || strings.HasPrefix(k, "chat_kafka_consumer_") {
			found = true
		}
	}
	if !found {
		t.Error("no Kafka error/consumer series exposed")
	}
}

// TestEveryConnectOutcomeIsExportedAtZeroBeforeTheFirstConnect: a series
// born at its first increment has no sample before it, so rate() misses a
// fresh node's first storm of refusals. Every outcome operations.md lists
// is there at 0 before any CONNECT.
func TestEveryConnectOutcomeIsExportedAtZeroBeforeTheFirstConnect(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `chat_mqtt_connects_total{outcome}` |") {
			row = line
		}
	}
	outcomes := regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row, -1)
	if len(outcomes) < 10 {
		t.Fatalf("operations.md lists %d connect outcomes: %q", len(outcomes), row)
	}
	m := scrape(t, startNode(t, pgtest.NewDB(t), nil).HTTPAddr())
	for _, o := range outcomes {
		name := `chat_mqtt_connects_total{outcome="` + o[1] + `"}`
		if v, ok := m[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 before any connect", name, v, ok)
		}
	}
}
