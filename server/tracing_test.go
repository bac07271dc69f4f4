package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// tracedNode starts a node whose spans go to an in-memory exporter, as
// they end (no batching delay).
func tracedNode(t *testing.T, env map[string]string) (*server.Server, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), env), nil, server.WithTracerProvider(tp)), exp
}

// clientTrace is the trace a client started before it published: a
// W3C traceparent with the sampled flag.
type clientTrace struct {
	trace trace.TraceID
	span  trace.SpanID
}

func newClientTrace(n byte) clientTrace {
	c := clientTrace{}
	for i := range c.trace {
		c.trace[i] = n + byte(i)
	}
	for i := range c.span {
		c.span[i] = 0xa0 + n + byte(i)
	}
	return c
}

func (c clientTrace) traceparent() string {
	return "00-" + c.trace.String() + "-" + c.span.String() + "-01"
}

// spansOf waits until the exporter holds every named span of trace tid
// and returns them by name (the first of each).
func spansOf(t *testing.T, exp *tracetest.InMemoryExporter, tid trace.TraceID, names ...string) map[string]tracetest.SpanStub {
	t.Helper()
	var got map[string]tracetest.SpanStub
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("spans %v of trace %s", names, tid), func() bool {
		got = map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			if _, seen := got[s.Name]; s.SpanContext.TraceID() == tid && !seen {
				got[s.Name] = s
			}
		}
		for _, n := range names {
			if _, ok := got[n]; !ok {
				return false
			}
		}
		return true
	})
	return got
}

// spanByID finds an exported span by its id.
func spanByID(exp *tracetest.InMemoryExporter, id trace.SpanID) (tracetest.SpanStub, bool) {
	for _, s := range exp.GetSpans() {
		if s.SpanContext.SpanID() == id {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantInt(t *testing.T, s tracetest.SpanStub, key string, want int64) {
	t.Helper()
	if v, ok := attr(s, key); !ok || v.AsInt64() != want {
		t.Errorf("%s: %s = %v (set %v), want %d", s.Name, key, v.String(), ok, want)
	}
}

func wantChildOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("%s: parent %s in trace %s, want %s (%s) in trace %s", child.Name, child.Parent.SpanID(),
			child.SpanContext.TraceID(), parent.SpanContext.SpanID(), parent.Name, parent.SpanContext.TraceID())
	}
}

func linksTo(s tracetest.SpanStub, sc trace.SpanContext) bool {
	for _, l := range s.Links {
		if l.SpanContext.SpanID() == sc.SpanID() && l.SpanContext.TraceID() == sc.TraceID() {
			return true
		}
	}
	return false
}

// publishTraced publishes a QoS 1 message with a traceparent user
// property (MQTT v5) and returns its PUBACK's seq.
func publishTraced(t *testing.T, pc *pahoClient, conv int64, body string, props paho.UserProperties) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := pc.Publish(ctx, &paho.Publish{Topic: testnode.MsgTopic(conv), QoS: 1, Payload: testnode.SendPayload(newID(), body),
		Properties: &paho.PublishProperties{User: props}})
	if err != nil || res.ReasonCode != 0 {
		t.Fatalf("publish: %+v %v", res, err)
	}
	seq, err := strconv.ParseInt(res.Properties.User.Get("seq"), 10, 64)
	if err != nil {
		t.Fatalf("PUBACK without seq: %+v", res.Properties)
	}
	return seq
}

func TestAnMQTTSendContinuesTheClientsTraceThroughValidationGroupCommitFanoutAndPuback(t *testing.T) {
	t.Parallel()
	srv, exp := tracedNode(t, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	recv := rawClient(t, srv.MQTTAddr(), 2, "trace-recv", 5, true)
	sender := newPaho(t, srv.MQTTAddr(), 1, "trace-send")
	ct := newClientTrace(1)
	seq := publishTraced(t, sender, conv.ID, "traced", paho.UserProperties{{Key: "traceparent", Value: ct.traceparent()}})
	if ev := nextEvent(t, recv, chat.EventMessageNew, 20*time.Second); ev.Seq != seq {
		t.Fatalf("recipient got seq %d, want %d", ev.Seq, seq)
	}

	got := spansOf(t, exp, ct.trace, "chat.send", "chat.validate", "chat.commit", "chat.fanout", "chat.puback")
	send := got["chat.send"]
	if send.Parent.SpanID() != ct.span || !send.Parent.IsRemote() || send.SpanKind != trace.SpanKindServer {
		t.Fatalf("chat.send: parent %s (remote %v), kind %v; want the client's span %s, remote, server",
			send.Parent.SpanID(), send.Parent.IsRemote(), send.SpanKind, ct.span)
	}
	wantInt(t, send, "chat.conversation_id", conv.ID)
	wantInt(t, send, "chat.user_id", 1)
	wantInt(t, send, "chat.seq", seq)
	if v, _ := attr(send, "mqtt.topic"); v.AsString() != testnode.MsgTopic(conv.ID) {
		t.Errorf("chat.send: mqtt.topic = %q", v.AsString())
	}
	for _, name := range []string{"chat.validate", "chat.commit", "chat.fanout", "chat.puback"} {
		wantChildOf(t, got[name], send)
	}
	// The send ends with its PUBACK on the wire, after the commit.
	if commit, puback := got["chat.commit"], got["chat.puback"]; puback.EndTime.Before(commit.EndTime) || send.EndTime.Before(puback.EndTime) {
		t.Errorf("commit ended %v, PUBACK written %v, send ended %v: want them in that order", commit.EndTime, puback.EndTime, send.EndTime)
	}
	wantInt(t, got["chat.puback"], "mqtt.reason_code", 0)
	wantInt(t, got["chat.commit"], "chat.seq", seq)
	fanout := got["chat.fanout"]
	wantInt(t, fanout, "chat.seq", seq)
	if v, _ := attr(fanout, "chat.fanout.sessions"); v.AsInt64() < 1 {
		t.Errorf("chat.fanout: offered to %d sessions, want the recipient's at least", v.AsInt64())
	}

	// The batch has a trace of its own (it serves many sends), linked
	// both ways with the send's commit.
	commit := got["chat.commit"]
	if len(commit.Links) != 1 {
		t.Fatalf("chat.commit has %d links, want its batch", len(commit.Links))
	}
	batch, ok := spanByID(exp, commit.Links[0].SpanContext.SpanID())
	if !ok || batch.Name != "chat.batch" {
		t.Fatalf("chat.commit links to %+v, want an exported chat.batch", commit.Links[0].SpanContext)
	}
	if batch.SpanContext.TraceID() == ct.trace || batch.Parent.IsValid() {
		t.Errorf("chat.batch is in trace %s with parent %s; want a root of its own", batch.SpanContext.TraceID(), batch.Parent.SpanID())
	}
	if !linksTo(batch, commit.SpanContext) {
		t.Errorf("chat.batch links %v, not the send's chat.commit", batch.Links)
	}
	if v, ok := attr(batch, "chat.batch.size"); !ok || v.AsInt64() < 1 {
		t.Errorf("chat.batch: chat.batch.size = %v", v.String())
	}
	wantInt(t, commit, "chat.batch.size", mustAttr(t, batch, "chat.batch.size").AsInt64())

	var sends int
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() == ct.trace && s.Name == "chat.send" {
			sends++
		}
	}
	if sends != 1 {
		t.Errorf("%d chat.send spans in the client's trace, want 1", sends)
	}
}

func mustAttr(t *testing.T, s tracetest.SpanStub, key string) attribute.Value {
	t.Helper()
	v, ok := attr(s, key)
	if !ok {
		t.Fatalf("%s has no %s", s.Name, key)
	}
	return v
}

func TestAnHTTPSendContinuesTheTraceOfItsTraceparentHeader(t *testing.T) {
	t.Parallel()
	srv, exp := tracedNode(t, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	recv := rawClient(t, srv.MQTTAddr(), 2, "trace-http-recv", 5, true)
	ct := newClientTrace(2)
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://%s/v1/conversations/%d/messages", srv.HTTPAddr(), conv.ID),
		bytes.NewBufferString(fmt.Sprintf(`{"clientMsgId":%q,"body":"over http"}`, newID())))
	req.Header.Set("Authorization", "Bearer "+testnode.Token(t, 1))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", ct.traceparent())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("http send: %s", resp.Status)
	}
	nextEvent(t, recv, chat.EventMessageNew, 20*time.Second)

	const route = "POST /v1/conversations/{id}/messages"
	got := spansOf(t, exp, ct.trace, route, "chat.commit", "chat.fanout")
	root := got[route]
	if root.Parent.SpanID() != ct.span || root.SpanKind != trace.SpanKindServer {
		t.Fatalf("%s: parent %s, kind %v; want the caller's span %s, server", route, root.Parent.SpanID(), root.SpanKind, ct.span)
	}
	wantInt(t, root, "http.response.status_code", http.StatusCreated)
	wantInt(t, root, "chat.user_id", 1)
	if v, _ := attr(root, "http.route"); v.AsString() != "/v1/conversations/{id}/messages" {
		t.Errorf("http.route = %q", v.AsString())
	}
	wantChildOf(t, got["chat.commit"], root)
	wantChildOf(t, got["chat.fanout"], root)
	if len(got["chat.commit"].Links) != 1 {
		t.Errorf("chat.commit has %d links, want its batch", len(got["chat.commit"].Links))
	}
}

func TestRelayedKafkaRecordsCarryATraceparentThatContinuesTheSendsTrace(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs Kafka")
	}
	kafkaAddr := startKafka(t)
	srv, exp := tracedNode(t, map[string]string{"CHAT_KAFKA_BROKERS": kafkaAddr, "CHAT_NODE_ID": "trace-relay"})
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	sender := newPaho(t, srv.MQTTAddr(), 1, "trace-kafka-send")
	ct := newClientTrace(3)
	seq := publishTraced(t, sender, conv.ID, "to kafka", paho.UserProperties{
		{Key: "traceparent", Value: ct.traceparent()}, {Key: "tracestate", Value: "vendor=abc"}})

	// The relay publishes the row; find the record of this message.
	var rec kafka.Message
	testkit.WaitFor(t, 30*time.Second, "the message's Kafka record", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs, err := kafkatest.ReadTopic(ctx, kafkaAddr, "chat.events", 12)
		if err != nil {
			return false
		}
		for _, m := range msgs {
			if kafkatest.Header(m, "type") == chat.EventMessageNew && string(m.Key) == strconv.FormatInt(conv.ID, 10) &&
				bytes.Contains(m.Value, []byte(`"seq":`+strconv.FormatInt(seq, 10)+`,`)) {
				rec = m
				return true
			}
		}
		return false
	})
	tp := kafkatest.Header(rec, "traceparent")
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[1] != ct.trace.String() || parts[3] != "01" {
		t.Fatalf("record traceparent %q, want the client's trace %s, sampled", tp, ct.trace)
	}
	if ts := kafkatest.Header(rec, "tracestate"); ts != "vendor=abc" {
		t.Errorf("record tracestate %q, want the client's vendor=abc", ts)
	}
	got := spansOf(t, exp, ct.trace, "chat.send", "chat.relay.publish")
	pub := got["chat.relay.publish"]
	if parts[2] != pub.SpanContext.SpanID().String() {
		t.Errorf("record's parent span %s, want chat.relay.publish %s", parts[2], pub.SpanContext.SpanID())
	}
	wantChildOf(t, pub, got["chat.send"])
	if pub.SpanKind != trace.SpanKindProducer {
		t.Errorf("chat.relay.publish kind %v, want producer", pub.SpanKind)
	}
	if v, _ := attr(pub, "messaging.destination.name"); v.AsString() != "chat.events" {
		t.Errorf("messaging.destination.name = %q", v.AsString())
	}
}
