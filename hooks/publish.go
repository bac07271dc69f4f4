package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/strictjson"
	"github.com/chatd/chatd/internal/tracing"
)

// MQTT v5 reason codes for PUBACK, by domain error code.
var reasonCodes = map[chat.Code]byte{
	chat.CodeInvalid:          0x99, // payload format invalid
	chat.CodeTooLarge:         0x99,
	chat.CodeUnsupported:      0x99,
	chat.CodeConflict:         0x99,
	chat.CodeTooManyReactions: 0x99, // final: a limit of the message, not of time
	chat.CodeNotMember:        0x87, // not authorized
	chat.CodeForbidden:        0x87,
	chat.CodeBlocked:          0x87,
	chat.CodeNotFound:         0x87,
	chat.CodeGone:             0x87,
	chat.CodeRateLimited:      0x97, // quota exceeded
	chat.CodeMemberCap:        0x97,
	chat.CodeUnavailable:      0x80, // unspecified error: retry
	chat.CodeInternal:         0x83, // implementation specific error
}

// ReasonCode maps a domain error to its MQTT v5 reason code.
func ReasonCode(err error) byte {
	if c, ok := reasonCodes[chat.ErrorCode(err)]; ok {
		return c
	}
	return 0x83
}

// changePayload is an edit, recall or reaction.
type changePayload struct {
	ClientMsgID string  `json:"clientMsgId"`
	Seq         int64   `json:"seq"`
	Body        *string `json:"body"`  // edit (nil: left out)
	Emoji       string  `json:"emoji"` // react
	On          *bool   `json:"on"`    // react
}

// hasBody reports whether a recall or reaction carries a body, which it
// does not take ("" is tolerated, as it always was).
func (p changePayload) hasBody() bool { return p.Body != nil && *p.Body != "" }

type readPayload struct {
	Seq int64 `json:"seq"`
}

// decodeStrict decodes exactly one JSON object whose field names are the
// documented ones, exactly and once each (as over HTTP).
//
// A valid payload takes json.Unmarshal, which reads b in place: a Decoder
// costs three allocations and a copy of the payload on every publish. Only
// a payload it or ExactKeys refuses goes through the Decoder, whose errors
// say what was wrong: ExactKeys refuses every field the Decoder's
// DisallowUnknownFields would, and Unmarshal every syntax error, type
// mismatch and trailing value, so the two paths accept the same payloads.
func decodeStrict(b []byte, v any) error {
	if len(b) == 0 {
		return chat.Errorf(chat.CodeInvalid, "payload is empty; expected a JSON object")
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD.
	if !utf8.Valid(b) {
		return chat.Errorf(chat.CodeInvalid, "payload is not valid UTF-8")
	}
	if json.Unmarshal(b, v) == nil && strictjson.ExactKeys(b, reflect.TypeOf(v)) == nil {
		return nil
	}
	// What the refused Unmarshal set must not survive into the Decoder's
	// result.
	reflect.ValueOf(v).Elem().SetZero()
	return decodeExplained(b, v)
}

// decodeExplained is decodeStrict by a Decoder: one value, unknown fields
// refused, nothing after it; its errors name the problem.
func decodeExplained(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			// The name may be as long as the payload; a reason string
			// holds at most 65,535 bytes.
			if u, err := strconv.Unquote(name); err == nil {
				name = u
			}
			msg = fmt.Sprintf("json: unknown field %q", strictjson.Clip(name))
		}
		return chat.Errorf(chat.CodeInvalid, "payload is not the expected JSON object: %s", msg)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return chat.Errorf(chat.CodeInvalid, "payload has data after the JSON object")
	}
	return strictjson.ExactKeys(b, reflect.TypeOf(v))
}

// publish is one client publish being answered. Its answer (a PUBACK for
// QoS 1, an error event where the protocol has no better way) is given
// exactly once, by ok or fail, from whichever goroutine finished the work.
type publish struct {
	h    *Chat
	cl   *mqtt.Client
	ci   *clientInfo
	qos  byte
	slot *ackSlot // QoS 1: its place in the connection's PUBACK order
	// span is the publish's span while tracing is on (nil when off); it
	// ends when the PUBACK is written.
	span trace.Span
}

// OnPublish hands the publish to the domain and returns at once: mochi
// neither acknowledges nor routes it (ErrRejectPacket). The connection's
// read loop never waits for PostgreSQL; the answer goes out when the work
// is done, in publish order (ackQueue), through the client's delivery
// session, and only after the commit: acked means committed.
func (h *Chat) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	ci := h.info(cl)
	if ci == nil {
		return pk, packets.ErrRejectPacket
	}
	p := h.begin(cl, ci, pk)
	if p == nil {
		return pk, packets.ErrRejectPacket
	}
	if h.draining.Load() {
		p.fail("shutdown", chat.Errorf(chat.CodeUnavailable, "server is shutting down; reconnect and resend"), 0, "")
		return pk, packets.ErrRejectPacket
	}
	r := ParseTopic(pk.TopicName)
	switch r.Kind {
	case RouteMsg:
		h.onSend(p, pk, r.ConversationID)
	case RouteRead:
		h.onRead(p, pk, r.ConversationID)
	case RouteTyping:
		h.onTyping(p, pk, r.ConversationID)
	case RouteRPC:
		h.onRPC(p, pk, r.Method)
	case RouteEdit, RouteRecall, RouteReact:
		h.onChange(p, pk, r)
	default:
		p.fail("denied", chat.Errorf(chat.CodeForbidden, "publishing to this topic is not allowed"), 0, "")
	}
	return pk, packets.ErrRejectPacket
}

// begin starts answering a publish: a QoS 1 publish takes its place in
// the connection's PUBACK order. A v5 client over the Receive Maximum is
// disconnected (0x93) and begin returns nil; a 3.1.1 client waits, and so
// does a QoS 0 publish over as many in flight (flightLimit). It also
// returns nil for a retransmission (DUP) of a publish whose answer is not
// written yet, which answers both (ackQueue.reserve).
func (h *Chat) begin(cl *mqtt.Client, ci *clientInfo, pk packets.Packet) *publish {
	p := &publish{h: h, cl: cl, ci: ci, qos: pk.FixedHeader.Qos}
	if p.qos > 0 {
		slot, ok := ci.acks.reserve(pk.PacketID, !isV5(cl), pk.FixedHeader.Dup)
		if !ok {
			h.cfg.Metrics.Publishes.WithLabelValues("any", "receive_maximum").Inc()
			_ = h.server.DisconnectClient(cl, packets.ErrReceiveMaximum)
			return nil
		}
		if slot == nil {
			h.cfg.Metrics.Publishes.WithLabelValues("any", "retransmission").Inc()
			return nil
		}
		p.slot = slot
	} else if !ci.qos0.acquire() {
		return nil
	}
	h.busy.Add(1)
	return p
}

// answer hands the publish's PUBACK (QoS 1) to the connection's session.
func (p *publish) answer(a chat.Ack) {
	defer p.h.busy.Add(-1)
	if p.slot == nil {
		p.ci.qos0.release()
		if p.span != nil {
			p.span.End() // QoS 0: answered, nothing to write
		}
		return
	}
	if p.span != nil && p.span.IsRecording() {
		a.Sent = p.tracePuback(a)
	}
	p.ci.acks.complete(p.slot, a, func(acks []chat.Ack) { p.h.cfg.Hub.Reply(p.cl.ID, p.ci.conn, acks) })
}

// startTrace starts the publish's span (tracing on) and returns its
// context: a child of the client's trace when its publish carried a
// traceparent user property (MQTT v5), else the root of a new trace.
// Off, it returns context.Background() and allocates nothing.
func (p *publish) startTrace(name, topic string, props []packets.UserProperty, conv int64) context.Context {
	tr := p.h.cfg.Tracer
	if tr == nil {
		return context.Background()
	}
	ctx := tracing.ExtractFrom(context.Background(), userProps(props))
	ctx, p.span = tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		tracing.AttrTopic.String(topic), tracing.AttrClientID.String(p.cl.ID), tracing.AttrQoS.Int(int(p.qos)),
		tracing.AttrUser.Int64(p.ci.userID), tracing.AttrConversation.Int64(conv)))
	return ctx
}

// startValidate starts the span of a publish's validation: payload
// decoding, the Service's checks and rate limits, until group commit
// holds the change. A no-op span when the publish is not traced.
func (p *publish) startValidate(ctx context.Context) trace.Span {
	if p.span == nil {
		return tracing.NoopSpan
	}
	_, s := p.h.cfg.Tracer.Start(ctx, tracing.SpanValidate)
	return s
}

// tracePuback starts the span of a publish's PUBACK, from its answer to
// its write (after the answers of the connection's earlier publishes), and
// returns what ends it and the publish's span once delivery wrote it.
func (p *publish) tracePuback(a chat.Ack) func(error) {
	send := p.span
	_, ps := p.h.cfg.Tracer.Start(trace.ContextWithSpan(context.Background(), send), tracing.SpanPuback,
		trace.WithAttributes(tracing.AttrReasonCode.Int(int(a.Reason))))
	return func(err error) {
		tracing.FailTransport(ps, err)
		ps.End()
		send.End()
	}
}

// traced records a committed change's outcome on the publish's span.
func (p *publish) traced(res chat.ChangeResult) {
	if p.span == nil || !p.span.IsRecording() {
		return
	}
	p.span.SetAttributes(tracing.AttrSeq.Int64(res.Entry.Seq), tracing.AttrDuplicate.Bool(res.Duplicate))
	if res.Unchanged {
		p.span.SetAttributes(tracing.AttrUnchanged.Bool(true))
	}
}

// userProps reads the W3C trace context from MQTT v5 user properties.
// Keys are matched without regard to case: the W3C names are lower case,
// HTTP habits are not.
type userProps []packets.UserProperty

func (u userProps) Get(key string) string {
	for _, p := range u {
		if strings.EqualFold(p.Key, key) {
			return p.Val
		}
	}
	return ""
}

func (u userProps) Set(string, string) {}

func (u userProps) Keys() []string {
	keys := make([]string, len(u))
	for i, p := range u {
		keys[i] = p.Key
	}
	return keys
}

func (p *publish) ok(kind string, props ...chat.KV) {
	p.h.cfg.Metrics.Publishes.WithLabelValues(kind, "ok").Inc()
	p.answer(chat.Ack{Props: props})
}

// fail reports err for one publish: v5 QoS 1 gets a PUBACK reason code;
// v3.1.1 and QoS 0 get ack-and-drop plus an error event, except when the
// database is unavailable: then a v3.1.1 QoS 1 publish gets no PUBACK and
// its connection is closed (after the answers before it) so the client
// resends it.
func (p *publish) fail(kind string, err error, conv int64, clientMsgID string) {
	h := p.h
	code := chat.ErrorCode(err)
	h.cfg.Metrics.Publishes.WithLabelValues(kind, string(code)).Inc()
	if p.span != nil {
		tracing.Fail(p.span, err)
	}
	if code == chat.CodeInternal {
		h.cfg.Logger.Error("publish failed", "client", p.cl.ID, "user", p.ci.userID, "conversation", conv, "kind", kind, "err", err)
	}
	retry := retryAfter(err)
	switch {
	case isV5(p.cl) && p.qos > 0:
		// The reason code is coarse (0x87 covers not a member, not
		// allowed, not found and recalled); the code property says which.
		props := []chat.KV{{Key: "code", Val: string(code)}}
		if retry > 0 {
			props = append(props, chat.KV{Key: "retryAfter", Val: strconv.FormatInt(retry, 10)})
		}
		p.answer(chat.Ack{Reason: ReasonCode(err), Message: chat.ErrorMessage(err), Props: props})
		return
	case (code == chat.CodeUnavailable || code == chat.CodeInternal) && p.qos > 0:
		p.answer(chat.Ack{Close: "database unavailable: publish not acknowledged"})
		return
	}
	h.sendError(p.cl, p.ci, chat.Event{Type: chat.EventError, ConversationID: conv, ClientMsgID: clientMsgID, Code: code,
		Message: chat.ErrorMessage(err), RetryAfter: retry})
	p.answer(chat.Ack{})
}

// retryAfter is the seconds after which a publish refused for a rate limit
// may be retried, 0 for any other error.
func retryAfter(err error) int64 {
	if rl := chat.RateLimitOf(err); rl != nil && chat.ErrorCode(err) == chat.CodeRateLimited {
		return rl.RetryAfterSeconds()
	}
	return 0
}

// sendError publishes an error event to the client alone.
func (h *Chat) sendError(cl *mqtt.Client, ci *clientInfo, ev chat.Event) {
	if b, err := chat.EncodeEvent(ev); err == nil {
		h.cfg.Hub.SendDirect(cl.ID, ci.conn, chat.Packet{Payload: b, QoS: 1})
	}
}

// onSend hands the message to the domain, which commits it with the
// connection's other sends in flight (group commit) in the order they were
// published.
func (h *Chat) onSend(p *publish, pk packets.Packet, conv int64) {
	ctx := p.startTrace(tracing.SpanSend, pk.TopicName, pk.Properties.User, conv)
	validate := p.startValidate(ctx)
	var body chat.SendPayload
	if err := decodeStrict(pk.Payload, &body); err != nil {
		tracing.Finish(validate, err)
		p.fail("msg", err, conv, "")
		return
	}
	if p.span != nil {
		p.span.SetAttributes(tracing.AttrClientMsgID.String(body.ClientMsgID))
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.SendTimeout)
	start := time.Now()
	h.cfg.Service.SubmitSend(ctx, body.Request(conv, p.ci.userID),
		func(res chat.SendResult, err error) {
			cancel()
			// Validation ends here when the Service refused the send at
			// once (invalid, rate limited), else at SubmitSend's return.
			validate.End()
			h.cfg.Metrics.SendLatency.Observe(time.Since(start).Seconds())
			if err != nil {
				p.fail("msg", err, conv, body.ClientMsgID)
				return
			}
			p.traced(chat.ChangeResult{Entry: res.Message, Duplicate: res.Duplicate})
			p.ok("msg", sendAckProps(res)...)
		})
	validate.End()
}

// sendAckProps are the user properties of a send's PUBACK, in one
// allocation besides the seq's digits.
func sendAckProps(res chat.SendResult) []chat.KV {
	n := 1
	if res.Duplicate {
		n++
	}
	if res.Message.Recalled {
		n++
	}
	props := make([]chat.KV, 1, n)
	props[0] = chat.KV{Key: "seq", Val: strconv.FormatInt(res.Message.Seq, 10)}
	if res.Duplicate {
		props = append(props, chat.KV{Key: "duplicate", Val: "true"})
	}
	if res.Message.Recalled {
		props = append(props, chat.KV{Key: "recalled", Val: "true"})
	}
	return props
}

// onChange hands an edit, recall or reaction to the domain: it goes
// through group commit like a send, in publish order, and its PUBACK
// carries the entry's seq (seq=0 with unchanged=true when it asked for
// what already was: a reaction already set or absent).
func (h *Chat) onChange(p *publish, pk packets.Packet, r Route) {
	kind, what := map[RouteKind]chat.EntryKind{RouteEdit: chat.KindEdit, RouteRecall: chat.KindRecall, RouteReact: chat.KindReaction}[r.Kind],
		map[RouteKind]string{RouteEdit: "edit", RouteRecall: "recall", RouteReact: "react"}[r.Kind]
	ctx := p.startTrace(changeSpan(r.Kind), pk.TopicName, pk.Properties.User, r.ConversationID)
	validate := p.startValidate(ctx)
	var body changePayload
	if err := decodeStrict(pk.Payload, &body); err != nil {
		tracing.Finish(validate, err)
		p.fail(what, err, r.ConversationID, "")
		return
	}
	if p.span != nil {
		p.span.SetAttributes(tracing.AttrClientMsgID.String(body.ClientMsgID))
	}
	c := chat.Change{Kind: kind, ConversationID: r.ConversationID, UserID: p.ci.userID, ClientMsgID: body.ClientMsgID, TargetSeq: body.Seq}
	var err error
	switch kind {
	case chat.KindEdit:
		if body.Emoji != "" || body.On != nil {
			err = chat.Errorf(chat.CodeInvalid, "an edit takes clientMsgId, seq and body")
		} else {
			c.Body, err = chat.EditBody(body.Body)
		}
	case chat.KindRecall:
		if body.hasBody() || body.Emoji != "" || body.On != nil {
			err = chat.Errorf(chat.CodeInvalid, "a recall takes clientMsgId and seq")
		}
	case chat.KindReaction:
		if body.hasBody() || body.On == nil {
			err = chat.Errorf(chat.CodeInvalid, `a reaction takes clientMsgId, seq, emoji and "on" (true sets, false removes)`)
		} else {
			c.Emoji, c.On = body.Emoji, *body.On
		}
	}
	if err != nil {
		tracing.Finish(validate, err)
		p.fail(what, err, r.ConversationID, body.ClientMsgID)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.SendTimeout)
	defer validate.End()
	h.cfg.Service.SubmitChange(ctx, c, func(res chat.ChangeResult, err error) {
		cancel()
		validate.End()
		if err != nil {
			p.fail(what, err, r.ConversationID, body.ClientMsgID)
			return
		}
		p.traced(res)
		props := []chat.KV{{Key: "seq", Val: strconv.FormatInt(res.Entry.Seq, 10)}, {Key: "targetSeq", Val: strconv.FormatInt(body.Seq, 10)}}
		if res.Duplicate {
			props = append(props, chat.KV{Key: "duplicate", Val: "true"})
		}
		if res.Unchanged {
			props = append(props, chat.KV{Key: "unchanged", Val: "true"})
		}
		if res.Entry.Recalled {
			props = append(props, chat.KV{Key: "recalled", Val: "true"})
		}
		p.ok(what, props...)
	})
}

// changeSpan names the span of a change publish.
func changeSpan(k RouteKind) string {
	switch k {
	case RouteEdit:
		return tracing.SpanEdit
	case RouteRecall:
		return tracing.SpanRecall
	}
	return tracing.SpanReact
}

func (h *Chat) onRead(p *publish, pk packets.Packet, conv int64) {
	var body readPayload
	if err := decodeStrict(pk.Payload, &body); err != nil {
		p.fail("read", err, conv, "")
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
		defer cancel()
		res, err := h.cfg.Service.MarkRead(ctx, conv, p.ci.userID, body.Seq)
		if err != nil {
			p.fail("read", err, conv, "")
			return
		}
		p.ok("read", chat.KV{Key: "lastReadSeq", Val: strconv.FormatInt(res.LastReadSeq, 10)})
	}()
}

// onTyping hands a typing indicator to the Service, which throttles it and
// tells the members online; nothing is stored. Over the typing rate limit,
// or refused again within the interval of a refusal already told, a QoS 0
// indicator is dropped silently: an error event per keystroke would cost
// more than the indicator.
func (h *Chat) onTyping(p *publish, pk packets.Packet, conv int64) {
	if !typingPayload(pk.Payload) {
		p.fail("typing", chat.Errorf(chat.CodeInvalid, "typing payload must be {}"), conv, "")
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
		defer cancel()
		if err := h.cfg.Service.Typing(ctx, conv, p.ci.userID); err != nil {
			if p.qos == 0 && (chat.ErrorCode(err) == chat.CodeRateLimited || errors.Is(err, chat.ErrTypingHeldBack)) {
				h.cfg.Metrics.Publishes.WithLabelValues("typing", string(chat.ErrorCode(err))).Inc()
				p.answer(chat.Ack{})
				return
			}
			p.fail("typing", err, conv, "")
			return
		}
		p.ok("typing")
	}()
}

// typingPayload reports whether b is a typing indicator's payload: {}
// (spaces allowed) or nothing at all (mosquitto_pub -n). Anything else (a
// draft's text) is refused, as other publishes' unknown fields are.
func typingPayload(b []byte) bool {
	if len(b) > 256 {
		return false
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || string(t) == "{}" {
		return true // every keystroke's indicator: no decoder
	}
	return decodeStrict(b, &struct{}{}) == nil
}

// onRPC queues an MQTT v5 request for the RPC workers; the reply goes to
// the caller's response topic with the same Correlation Data, its JSON the
// HTTP API's. The PUBACK says the request was taken (0x97 when the workers
// are saturated, with a 503 reply).
func (h *Chat) onRPC(p *publish, pk packets.Packet, method string) {
	ci := p.ci
	if !isV5(p.cl) {
		p.fail("rpc", chat.Errorf(chat.CodeInvalid, "request/response needs MQTT v5 (Response Topic)"), 0, "")
		return
	}
	rt := pk.Properties.ResponseTopic
	if rt == "" {
		p.fail("rpc", chat.Errorf(chat.CodeInvalid, "set a Response Topic under %s", UserTree(ci.userID)), 0, "")
		return
	}
	if !ResponseTopicAllowed(ci.userID, rt) {
		p.fail("rpc", chat.Errorf(chat.CodeForbidden, "response topic must be a topic of at most %d bytes under %s other than %s, without wildcards",
			MaxTopicLength, UserTree(ci.userID), EventsTopic(ci.userID)), 0, "")
		return
	}
	if h.cfg.RPC == nil {
		p.fail("rpc", chat.Errorf(chat.CodeNotFound, "request/response is not enabled"), 0, "")
		return
	}
	corr := append([]byte(nil), pk.Properties.CorrelationData...)
	payload := append([]byte(nil), pk.Payload...)
	reply := func(b []byte) {
		h.cfg.Hub.SendDirect(p.cl.ID, ci.conn, chat.Packet{Topic: rt, Payload: b, QoS: 1, CorrelationData: corr})
	}
	parent := chat.WithTokenIssuedAt(context.Background(), ci.issuedAt)
	if h.cfg.Tracer != nil {
		parent = tracing.ExtractFrom(parent, userProps(pk.Properties.User))
	}
	// The PUBACK is queued (p.ok below) before a tokens.revoke ends the
	// connection (endAfterRevoking).
	acked := make(chan struct{})
	revoking := method == chat.RPCRevokeTokens
	if revoking {
		ci.revoking.Add(1)
	}
	job := func() {
		if revoking {
			defer func() {
				<-acked
				h.endAfterRevoking(p.cl, ci)
			}()
		}
		ctx, span := parent, tracing.NoopSpan
		if tr := h.cfg.Tracer; tr != nil {
			ctx, span = tr.Start(ctx, tracing.SpanRPC, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
				tracing.AttrRPCMethod.String(method), tracing.AttrClientID.String(p.cl.ID), tracing.AttrUser.Int64(ci.userID)))
		}
		defer span.End()
		ctx, cancel := context.WithTimeout(ctx, h.cfg.SendTimeout)
		defer cancel()
		reply(h.cfg.RPC(ctx, ci.userID, method, payload))
	}
	if !h.rpc.submit(ci.userID, job) {
		if revoking {
			ci.revoking.Add(-1)
		}
		reply(rpcBusyReply)
		p.fail("rpc", errRPCBusy, 0, "")
		return
	}
	p.ok("rpc")
	close(acked)
}

// errRPCBusy refuses a request that finds every RPC worker busy and their
// queue full. Its retry delay is a fixed second: the workers empty a full
// queue in well under one when the database answers, and a client that
// waits longer than needed stalls a screen for nothing.
var errRPCBusy = &chat.Error{Code: chat.CodeRateLimited, Message: "the server is busy with requests; retry later",
	RateLimit: &chat.RateLimitInfo{Kind: "rpc_workers", RetryAfter: time.Second}}

// rpcBusyReply is the reply to a request refused with errRPCBusy.
var rpcBusyReply = func() []byte {
	type detail struct {
		Code       chat.Code `json:"code"`
		Message    string    `json:"message"`
		RetryAfter int64     `json:"retryAfter"`
	}
	b, err := json.Marshal(struct {
		Status int    `json:"status"`
		Error  detail `json:"error"`
	}{503, detail{chat.CodeUnavailable, errRPCBusy.Message, errRPCBusy.RateLimit.RetryAfterSeconds()}})
	if err != nil {
		panic(err)
	}
	return b
}()
