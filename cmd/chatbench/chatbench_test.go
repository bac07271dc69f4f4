package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testSecret = "bench-secret-0123456789abcdef0123456789"

// startChatd runs chatd in-process; it returns the node and its database.
func startChatd(t *testing.T) (*server.Server, string) {
	t.Helper()
	url := pgtest.NewDB(t)
	env := testnode.Env(t, url)
	env["CHAT_JWT_SECRET"] = testSecret
	return testnode.Start(t, env, nil), url
}

// runBench runs chatbench with args plus -json and decodes the report.
func runBench(t *testing.T, wantCode int, args ...string) Report {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, append(args, "-json", "-progress", "off"), &out, &errb)
	if code != wantCode {
		t.Fatalf("chatbench exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, wantCode, out.String(), errb.String())
	}
	var r Report
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("output is not the report JSON: %v\n%s", err, out.String())
	}
	return r
}

func chatArgs(srv *server.Server, extra ...string) []string {
	return append([]string{
		"-broker", srv.MQTTAddr(), "-http", "http://" + srv.HTTPAddr(), "-jwt-secret", testSecret,
		"-clients", "8", "-conversations", "12", "-group-min", "3", "-group-max", "6",
	}, extra...)
}

// assertNoLoss checks the invariants every run must hold.
func assertNoLoss(t *testing.T, r Report) {
	t.Helper()
	if !r.OK || r.Lost != 0 || r.Gaps != 0 || r.Refused != 0 || r.Acked == 0 {
		t.Fatalf("run not clean: ok=%v acked=%d lost=%d gaps=%d refused=%d errors=%v examples=%v",
			r.OK, r.Acked, r.Lost, r.Gaps, r.Refused, r.Errors, r.LossExamples)
	}
	if r.Delivered < r.Expected {
		t.Errorf("delivered %d < expected %d", r.Delivered, r.Expected)
	}
	if r.AckLatency.Count != r.Acked || r.AckLatency.P50 <= 0 || r.AckLatency.Max < r.AckLatency.P99 {
		t.Errorf("ack latency %+v for %d acks", r.AckLatency, r.Acked)
	}
	if r.DeliveryLatency.Count == 0 || r.AckedPerSec <= 0 || r.DeliveriesPerSec <= 0 {
		t.Errorf("no throughput figures: %+v", r)
	}
}

func TestSteadyRunDeliversEveryAckedMessageOnce(t *testing.T) {
	srv, url := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-duration", "2s", "-inflight", "2", "-verify-db", url, "-chatd-pid", fmt.Sprint(os.Getpid()))...)
	assertNoLoss(t, r)
	if r.Target != "chatd" || r.Conversations != 12 || r.Direct+r.Groups != 12 {
		t.Errorf("workload = %+v", r)
	}
	if d := r.Database; d == nil || !d.Gapless || d.MissingAcked != 0 || d.Duplicated != 0 || d.Rows != r.Acked {
		t.Errorf("database check = %+v, acked %d", d, r.Acked)
	}
	if r.Chatd == nil || r.Chatd.CPUSeconds <= 0 || r.Chatd.RSSMaxMiB <= 0 {
		t.Errorf("chatd process stats = %+v", r.Chatd)
	}
	if m := r.ServerMetrics; m == nil || m.Deltas["chat_mqtt_publishes_total"] < float64(r.Sent) || m.SendAvgMs <= 0 {
		t.Errorf("server metrics = %+v", m)
	}
	if m := r.Machine; m.CPUs == 0 || m.BusyPercent <= 0 || m.ChatbenchPercent <= 0 {
		t.Errorf("machine = %+v", m)
	}
}

func TestEditsAndReactionsAreEntriesDeliveredToEveryMember(t *testing.T) {
	srv, url := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-duration", "3s", "-inflight", "2", "-rate", "200", "-edits", "0.3", "-reactions", "0.3", "-verify-db", url)...)
	assertNoLoss(t, r)
	k := r.AckedByKind
	if k["edit"] == 0 || k["reaction"] == 0 || k["message"] == 0 || k["message"]+k["edit"]+k["reaction"] != r.Acked {
		t.Errorf("acked by kind = %v of %d", k, r.Acked)
	}
	if r.Unknown != 0 || r.Duplicates != 0 {
		t.Errorf("unknown %d, duplicates %d: an entry's delivery was not matched to its publish", r.Unknown, r.Duplicates)
	}
	if r.Events["message.edited"] == 0 || r.Events["reaction.updated"] == 0 {
		t.Errorf("events = %v", r.Events)
	}
	// Edits and reactions are entries of the stream: rows with seqs of
	// their own, gapless with the messages.
	if d := r.Database; d == nil || !d.Gapless || d.MissingAcked != 0 || d.Duplicated != 0 || d.Rows != r.Acked {
		t.Errorf("database check = %+v, acked %d", d, r.Acked)
	}
}

func TestMQTT311RunWithMessageBudget(t *testing.T) {
	srv, url := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-mqtt-version", "4", "-messages", "150", "-duration", "20s", "-verify-db", url)...)
	assertNoLoss(t, r)
	if r.Sent != 150 || r.Acked != 150 || r.Database.Rows != 150 {
		t.Errorf("sent %d acked %d stored %d, want 150", r.Sent, r.Acked, r.Database.Rows)
	}
}

// -ack-log lines every acknowledged publish up with the server's logs: its
// send time on the wall clock and its PUBACK latency.
func TestTheAckLogHoldsEveryAcknowledgedPublishWithItsSendTimeAndLatency(t *testing.T) {
	srv, _ := startChatd(t)
	path := t.TempDir() + "/acks.txt"
	before := time.Now()
	r := runBench(t, 0, chatArgs(srv, "-messages", "60", "-duration", "20s", "-ack-log", path)...)
	after := time.Now()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if int64(len(lines)) != r.Acked || r.Acked != 60 {
		t.Fatalf("%d lines for %d acknowledged publishes, want 60", len(lines), r.Acked)
	}
	for _, l := range lines {
		var sent float64
		var us int64
		if _, err := fmt.Sscanf(l, "%f %d", &sent, &us); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		at := time.UnixMicro(int64(sent * 1e6))
		if at.Before(before.Add(-time.Second)) || at.After(after) || us <= 0 || time.Duration(us)*time.Microsecond > after.Sub(before) {
			t.Fatalf("line %q: sent at %v, latency %dµs, outside the run (%v to %v)", l, at, us, before, after)
		}
	}
}

func TestRateIsHeld(t *testing.T) {
	srv, _ := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-rate", "100", "-duration", "2s")...)
	assertNoLoss(t, r)
	if r.AckedPerSec < 70 || r.AckedPerSec > 130 {
		t.Errorf("acked %.0f msgs/s at -rate 100", r.AckedPerSec)
	}
}

func TestStormClientsReconnectAndCatchUp(t *testing.T) {
	srv, url := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-mode", "storm", "-duration", "3s", "-verify-db", url)...)
	assertNoLoss(t, r)
	s := r.Storm
	if s == nil || !s.CaughtUp || s.Clients != 8 || s.ReconnectSeconds <= 0 || s.CatchUpSeconds < s.ReconnectSeconds {
		t.Fatalf("storm = %+v", s)
	}
}

func TestReceiptsModeCountsReadReceipts(t *testing.T) {
	srv, _ := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-mode", "receipts", "-rate", "50", "-duration", "2s")...)
	assertNoLoss(t, r)
	rc := r.Receipts
	if rc == nil || rc.Sent == 0 || rc.Acked != rc.Sent || rc.Failed != 0 || rc.ReadUpdated == 0 {
		t.Fatalf("receipts = %+v", rc)
	}
}

func TestRampFindsASustainableRate(t *testing.T) {
	srv, _ := startChatd(t)
	r := runBench(t, 0, chatArgs(srv, "-mode", "ramp", "-rate", "50", "-ramp-step", "500ms", "-ramp-steps", "3", "-ramp-factor", "2")...)
	assertNoLoss(t, r)
	if r.Ramp == nil || len(r.Ramp.Steps) == 0 || r.Ramp.Steps[0].TargetRate != 50 {
		t.Fatalf("ramp = %+v", r.Ramp)
	}
	if r.Ramp.Steps[0].Verdict == "ok" && r.Ramp.MaxSustainable <= 0 {
		t.Errorf("ramp passed a step but reports no sustainable rate: %+v", r.Ramp)
	}
}

func TestPlainBrokerRun(t *testing.T) {
	r := runBench(t, 0, "-plain", "-broker", mqtttest.PlainBroker(t), "-clients", "8", "-conversations", "12", "-group-max", "6", "-duration", "2s")
	assertNoLoss(t, r)
	if r.Target != "plain" {
		t.Errorf("target = %q", r.Target)
	}
}

func TestTableOutputAndBadFlags(t *testing.T) {
	srv, _ := startChatd(t)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := run(ctx, append(chatArgs(srv, "-messages", "20"), "-progress", "off"), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	for _, s := range []string{"throughput", "publish->PUBACK", "publish->delivery", "verdict", "OK:"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
	if code := run(ctx, []string{"-mode", "nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-mode must be") {
		t.Errorf("bad mode: exit %d, %s", code, errb.String())
	}
}

func TestAScrapeOfANodeWithAMetricsTokenSendsTheNodesToken(t *testing.T) {
	const token = "bench-metrics-token-0123456789"
	url := pgtest.NewDB(t)
	env := testnode.Env(t, url)
	env["CHAT_JWT_SECRET"] = testSecret
	env["CHAT_METRICS_TOKEN"] = token
	srv := testnode.Start(t, env, nil)
	metricsURL := "http://" + srv.HTTPAddr() + "/metrics"
	ctx := context.Background()

	t.Setenv("CHAT_METRICS_TOKEN", "")
	if _, err := scrapeMetrics(ctx, metricsURL); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("scrape without the token: %v, want 401", err)
	}
	t.Setenv("CHAT_METRICS_TOKEN", token)
	m, err := scrapeMetrics(ctx, metricsURL)
	if err != nil {
		t.Fatalf("scrape with CHAT_METRICS_TOKEN set: %v", err)
	}
	if _, ok := m["chat_http_requests_total"]; !ok {
		t.Fatalf("scrape with the token read no chat_http_requests_total: %v", m)
	}
}
