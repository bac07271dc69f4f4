package relay_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/tracing"
)

const (
	sendTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sendTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	sendSpanID      = "00f067aa0ba902b7"
)

// insertTraced commits one message.new outbox row of conv with the given
// trace context, as the store writes a traced send's.
func insertTraced(t *testing.T, pool *pgxpool.Pool, conv int64, tc chat.TraceContext) {
	t.Helper()
	ev := chat.MessageEvent(chat.Message{ConversationID: conv, Seq: 1, SenderID: 7, ClientMsgID: uuid.NewString(),
		Body: "traced", CreatedAt: time.Now().UTC()})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO outbox (msg_key, type, payload, traceparent, tracestate)
		VALUES ($1, 'message.new', $2::jsonb, NULLIF($3, ''), NULLIF($4, ''))`,
		strconv.FormatInt(conv, 10), string(b), tc.Parent, tc.State); err != nil {
		t.Fatal(err)
	}
}

func recordOf(msgs []kafka.Message, conv int64) (kafka.Message, bool) {
	for _, m := range msgs {
		if string(m.Key) == strconv.FormatInt(conv, 10) {
			return m, true
		}
	}
	return kafka.Message{}, false
}

func TestRelayPassesARowsTraceContextOnInItsRecordAsStoredWhenTracingIsOff(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	rl := newRelay(t, pool, testConfig(t, port, nil))
	insertTraced(t, pool, 71, chat.TraceContext{Parent: sendTraceparent, State: "vendor=x"})
	insertTraced(t, pool, 72, chat.TraceContext{})
	start(t, rl.Run)
	msgs := readUntil(t, addr(port), 2, 15*time.Second)

	traced, ok := recordOf(msgs, 71)
	if !ok {
		t.Fatal("the traced row's record is missing")
	}
	if tp, _ := kafkatest.LookupHeader(traced, "traceparent"); tp != sendTraceparent {
		t.Errorf("traceparent header %q, want the row's %q", tp, sendTraceparent)
	}
	if ts, _ := kafkatest.LookupHeader(traced, "tracestate"); ts != "vendor=x" {
		t.Errorf("tracestate header %q, want vendor=x", ts)
	}
	plain, _ := recordOf(msgs, 72)
	if _, ok := kafkatest.LookupHeader(plain, "traceparent"); ok {
		t.Errorf("an untraced row's record has a traceparent: %v", plain.Headers)
	}
	ev, err := relay.DecodeEvent(traced)
	if err != nil || ev.Trace != (chat.TraceContext{Parent: sendTraceparent, State: "vendor=x"}) {
		t.Fatalf("DecodeEvent: trace %+v, err %v; want the record's headers", ev.Trace, err)
	}
}

func TestATracedRowsKafkaWriteIsASpanOfItsTraceAndTheConsumerContinuesIt(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.New(tp)

	cfg := testConfig(t, port, nil)
	cfg.Tracer = tr
	rl := newRelay(t, pool, cfg)
	start(t, rl.Run)
	var mu sync.Mutex
	var handled []chat.Event
	cons, err := relay.NewConsumer(relay.ConsumerConfig{Brokers: []string{addr(port)}, NodeID: "traced", Tracer: tr,
		CommitInterval: 100 * time.Millisecond, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Logger: testLogger(t), Handler: func(e chat.Event) { mu.Lock(); handled = append(handled, e); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	start(t, cons.Run)
	// A new group starts at the newest offset once it has joined: send
	// traced rows until the consumer sees one.
	var got chat.Event
	testkit.WaitFor(t, 30*time.Second, "the consumer handling a traced event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range handled {
			if e.ConversationID == 73 {
				got = e
				return true
			}
		}
		insertTraced(t, pool, 73, chat.TraceContext{Parent: sendTraceparent})
		rl.Kick()
		return false
	})

	var publish, consume tracetest.SpanStub
	testkit.WaitFor(t, 10*time.Second, "the relay's and the consumer's spans", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == tracing.SpanRelayConsume && s.SpanContext.SpanID() == tracing.SpanContext(got.Trace).SpanID() {
				consume = s
			}
		}
		if !consume.SpanContext.IsValid() {
			return false
		}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.SpanID() == consume.Parent.SpanID() {
				publish = s
			}
		}
		return publish.SpanContext.IsValid()
	})
	if publish.Name != tracing.SpanRelayPublish || publish.SpanKind != trace.SpanKindProducer {
		t.Fatalf("the consumer's parent is %q (%v), want the relay's %s producer span", publish.Name, publish.SpanKind, tracing.SpanRelayPublish)
	}
	if publish.Parent.SpanID().String() != sendSpanID || publish.SpanContext.TraceID().String() != sendTraceID {
		t.Errorf("%s: parent %s in trace %s, want the row's %s in %s", publish.Name, publish.Parent.SpanID(),
			publish.SpanContext.TraceID(), sendSpanID, sendTraceID)
	}
	if consume.SpanKind != trace.SpanKindConsumer || !strings.HasPrefix(got.Trace.Parent, "00-"+sendTraceID+"-") {
		t.Errorf("consumer span kind %v, handed-on trace %q: want a consumer span in the send's trace", consume.SpanKind, got.Trace.Parent)
	}
}
