package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	chat "github.com/chatd/chatd"
)

// ScopeName is the instrumentation scope of every chatd span.
const ScopeName = "github.com/chatd/chatd"

// Span names. A send's spans share its trace; the batch span has a trace
// of its own (one batch serves many sends) and is linked both ways.
const (
	// SpanSend and its siblings cover one MQTT publish of a stream
	// change, from the hook taking it to its PUBACK on the wire.
	SpanSend   = "chat.send"
	SpanEdit   = "chat.edit"
	SpanRecall = "chat.recall"
	SpanReact  = "chat.react"
	// SpanValidate: decoding the payload, validation and the rate
	// limits, until the change waits for group commit.
	SpanValidate = "chat.validate"
	// SpanCommit: one change in group commit, from queued to answered;
	// linked to its SpanBatch.
	SpanCommit = "chat.commit"
	// SpanBatch: one group-commit transaction.
	SpanBatch = "chat.batch"
	// SpanFanout: routing a committed event to this node's sessions.
	SpanFanout = "chat.fanout"
	// SpanPuback: from the publish's answer to its PUBACK written (the
	// wait for earlier publishes of the connection included).
	SpanPuback = "chat.puback"
	// SpanRPC: one MQTT v5 request (chat/v1/rpc/{method}).
	SpanRPC = "chat.rpc"
	// SpanRelayPublish: one outbox row written to Kafka; the record's
	// traceparent names this span.
	SpanRelayPublish = "chat.relay.publish"
	// SpanRelayConsume: one Kafka record handled by a node's consumer.
	SpanRelayConsume = "chat.relay.consume"
)

// Attribute keys of chatd's spans (docs/operations.md lists which span
// carries which).
const (
	AttrConversation = attribute.Key("chat.conversation_id")
	AttrUser         = attribute.Key("chat.user_id")
	AttrClientMsgID  = attribute.Key("chat.client_msg_id")
	AttrSeq          = attribute.Key("chat.seq")
	AttrDuplicate    = attribute.Key("chat.duplicate")
	AttrUnchanged    = attribute.Key("chat.unchanged")
	AttrErrorCode    = attribute.Key("chat.error_code")
	AttrBatchSize    = attribute.Key("chat.batch.size")
	AttrEventType    = attribute.Key("chat.event.type")
	AttrEventID      = attribute.Key("chat.event_id")
	AttrMembers      = attribute.Key("chat.fanout.members")
	AttrSessions     = attribute.Key("chat.fanout.sessions")
	AttrRPCMethod    = attribute.Key("rpc.method")
	AttrClientID     = attribute.Key("mqtt.client_id")
	AttrTopic        = attribute.Key("mqtt.topic")
	AttrQoS          = attribute.Key("mqtt.qos")
	AttrReasonCode   = attribute.Key("mqtt.reason_code")
)

// Tracer starts chatd's spans. A nil *Tracer is tracing off.
type Tracer struct {
	t trace.Tracer
}

// New returns a Tracer on tp; nil tp is off (a nil Tracer).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{t: tp.Tracer(ScopeName)}
}

// NoopSpan is what a nil Tracer hands out: an empty struct in an
// interface, so handing it out allocates nothing.
var NoopSpan trace.Span = noop.Span{}

// Start starts a span as a child of ctx's span (or of the remote parent
// Extract put there). Off, it returns ctx and a no-op span.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, NoopSpan
	}
	return t.t.Start(ctx, name, opts...)
}

// Finish ends span with err's outcome: a chat error a client caused
// (invalid, not a member, rate limited ...) is an answer, recorded as
// chat.error_code; unavailable and internal failures also set the span's
// status to Error, which is what error-rate alerts count.
func Finish(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		Fail(span, err)
	}
	span.End()
}

// Fail records err on span as Finish does, without ending it.
func Fail(span trace.Span, err error) {
	if err == nil {
		return
	}
	code := chat.ErrorCode(err)
	span.SetAttributes(AttrErrorCode.String(string(code)))
	if code == chat.CodeUnavailable || code == chat.CodeInternal {
		span.RecordError(err)
		span.SetStatus(codes.Error, string(code))
	}
}

// FailTransport marks span failed by an error outside the domain (a
// write, Kafka).
func FailTransport(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// propagator reads and writes W3C traceparent and tracestate.
var propagator = propagation.TraceContext{}

// Keys of the W3C trace-context headers, as MQTT user properties, HTTP
// headers and Kafka record headers all name them.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// Inject is the trace context of ctx's span, empty when ctx carries none.
// A span that is not sampled is still passed on (flags 00), so a
// downstream service keeps the same trace id and the same decision.
func Inject(ctx context.Context) chat.TraceContext {
	return FromSpanContext(trace.SpanContextFromContext(ctx))
}

// FromSpanContext writes sc as W3C headers; empty when sc is invalid.
func FromSpanContext(sc trace.SpanContext) chat.TraceContext {
	if !sc.IsValid() {
		return chat.TraceContext{}
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	return chat.TraceContext{Parent: "00-" + tid.String() + "-" + sid.String() + "-" + sc.TraceFlags().String(),
		State: sc.TraceState().String()}
}

// Extract returns ctx with tc as its remote parent; ctx itself when tc is
// empty or malformed (a malformed traceparent starts a new trace, as W3C
// asks).
func Extract(ctx context.Context, tc chat.TraceContext) context.Context {
	if tc.Parent == "" {
		return ctx
	}
	return propagator.Extract(ctx, traceCarrier{&tc})
}

// SpanContext is tc parsed; invalid when tc is empty or malformed.
func SpanContext(tc chat.TraceContext) trace.SpanContext {
	if tc.Parent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(Extract(context.Background(), tc))
}

// ExtractFrom returns ctx with the remote parent that carrier's
// traceparent and tracestate name (MQTT user properties, HTTP headers,
// Kafka headers: each adapter has its carrier).
func ExtractFrom(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return propagator.Extract(ctx, carrier)
}

// traceCarrier is a chat.TraceContext as a propagation carrier.
type traceCarrier struct{ tc *chat.TraceContext }

func (c traceCarrier) Get(key string) string {
	switch key {
	case HeaderTraceparent:
		return c.tc.Parent
	case HeaderTracestate:
		return c.tc.State
	}
	return ""
}

func (c traceCarrier) Set(key, value string) {
	switch key {
	case HeaderTraceparent:
		c.tc.Parent = value
	case HeaderTracestate:
		c.tc.State = value
	}
}

func (c traceCarrier) Keys() []string { return []string{HeaderTraceparent, HeaderTracestate} }
