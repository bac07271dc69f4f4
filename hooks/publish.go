package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/delivery"
)

// MQTT v5 reason codes for PUBACK, by domain error code.
var reasonCodes = map[chat.Code]byte{
	chat.CodeInvalid:     0x99, // payload format invalid
	chat.CodeTooLarge:    0x99,
	chat.CodeConflict:    0x99,
	chat.CodeNotMember:   0x87, // not authorized
	chat.CodeForbidden:   0x87,
	chat.CodeNotFound:    0x87,
	chat.CodeRateLimited: 0x97, // quota exceeded
	chat.CodeMemberCap:   0x97,
	chat.CodeUnavailable: 0x80, // unspecified error: retry
	chat.CodeInternal:    0x83, // implementation specific error
}

// ReasonCode maps a domain error to its MQTT v5 reason code.
func ReasonCode(err error) byte {
	if c, ok := reasonCodes[chat.ErrorCode(err)]; ok {
		return c
	}
	return 0x83
}

type sendPayload struct {
	ClientMsgID string `json:"clientMsgId"`
	Body        string `json:"body"`
}

type readPayload struct {
	Seq int64 `json:"seq"`
}

// decodeStrict decodes exactly one JSON object with no unknown fields.
func decodeStrict(b []byte, v any) error {
	if len(b) == 0 {
		return chat.Errorf(chat.CodeInvalid, "payload is empty; expected a JSON object")
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD.
	if !utf8.Valid(b) {
		return chat.Errorf(chat.CodeInvalid, "payload is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return chat.Errorf(chat.CodeInvalid, "payload is not the expected JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return chat.Errorf(chat.CodeInvalid, "payload has data after the JSON object")
	}
	return nil
}

// OnPublish executes the publish against the domain. The packet is never
// routed by mochi (Ignore): delivery goes through the Hub after commit.
func (h *Chat) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	ci := h.info(cl)
	if ci == nil {
		return pk, packets.ErrRejectPacket
	}
	h.busy.Add(1)
	defer h.busy.Add(-1)
	if h.draining.Load() {
		return h.fail(cl, pk, ci, "shutdown", chat.Errorf(chat.CodeUnavailable, "server is shutting down; reconnect and resend"), 0, "")
	}
	r := ParseTopic(pk.TopicName)
	switch r.Kind {
	case RouteMsg:
		return h.onSend(cl, pk, ci, r.ConversationID)
	case RouteRead:
		return h.onRead(cl, pk, ci, r.ConversationID)
	case RouteTyping:
		return h.onTyping(cl, pk, ci, r.ConversationID)
	case RouteRPC:
		return h.onRPC(cl, pk, ci, r.Method)
	}
	return h.fail(cl, pk, ci, "denied", chat.Errorf(chat.CodeForbidden, "publishing to this topic is not allowed"), 0, "")
}

func (h *Chat) ok(kind string, pk packets.Packet, props ...packets.UserProperty) (packets.Packet, error) {
	h.cfg.Metrics.Publishes.WithLabelValues(kind, "ok").Inc()
	pk.Ignore = true
	pk.FixedHeader.Retain = false
	pk.Properties = packets.Properties{User: props}
	return pk, nil
}

// fail reports err for one publish: v5 QoS1 gets a PUBACK reason code;
// v3.1.1 and QoS0 get ack-and-drop plus an error event, except when the
// database is unavailable: then a v3.1.1 QoS1 publish gets no PUBACK and
// its connection is closed so the client resends it.
func (h *Chat) fail(cl *mqtt.Client, pk packets.Packet, ci *clientInfo, kind string, err error, conv int64, clientMsgID string) (packets.Packet, error) {
	code := chat.ErrorCode(err)
	h.cfg.Metrics.Publishes.WithLabelValues(kind, string(code)).Inc()
	retry := code == chat.CodeUnavailable || code == chat.CodeInternal
	if code == chat.CodeInternal {
		h.cfg.Logger.Error("publish failed", "client", cl.ID, "user", ci.userID, "conversation", conv, "kind", kind, "err", err)
	}
	if isV5(cl) && pk.FixedHeader.Qos > 0 {
		return pk, packets.Code{Code: ReasonCode(err), Reason: chat.ErrorMessage(err)}
	}
	if retry && pk.FixedHeader.Qos > 0 {
		cl.Stop(errors.New("database unavailable: publish not acknowledged"))
		return pk, packets.ErrRejectPacket
	}
	ev := chat.Event{Type: chat.EventError, ConversationID: conv, ClientMsgID: clientMsgID, Code: code, Message: chat.ErrorMessage(err)}
	if b, mErr := json.Marshal(ev); mErr == nil {
		h.cfg.Hub.SendDirect(cl.ID, delivery.Packet{Topic: delivery.EventsTopic(ci.userID), Payload: b, QoS: 1})
	}
	return pk, packets.CodeSuccessIgnore
}

func (h *Chat) onSend(cl *mqtt.Client, pk packets.Packet, ci *clientInfo, conv int64) (packets.Packet, error) {
	var p sendPayload
	if err := decodeStrict(pk.Payload, &p); err != nil {
		return h.fail(cl, pk, ci, "msg", err, conv, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	start := time.Now()
	res, err := h.cfg.Service.Send(ctx, chat.SendRequest{ConversationID: conv, SenderID: ci.userID, ClientMsgID: p.ClientMsgID, Body: p.Body})
	h.cfg.Metrics.SendLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		return h.fail(cl, pk, ci, "msg", err, conv, p.ClientMsgID)
	}
	props := []packets.UserProperty{{Key: "seq", Val: strconv.FormatInt(res.Message.Seq, 10)}}
	if res.Duplicate {
		props = append(props, packets.UserProperty{Key: "duplicate", Val: "true"})
	}
	return h.ok("msg", pk, props...)
}

func (h *Chat) onRead(cl *mqtt.Client, pk packets.Packet, ci *clientInfo, conv int64) (packets.Packet, error) {
	var p readPayload
	if err := decodeStrict(pk.Payload, &p); err != nil {
		return h.fail(cl, pk, ci, "read", err, conv, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	res, err := h.cfg.Service.MarkRead(ctx, conv, ci.userID, p.Seq)
	if err != nil {
		return h.fail(cl, pk, ci, "read", err, conv, "")
	}
	return h.ok("read", pk, packets.UserProperty{Key: "lastReadSeq", Val: strconv.FormatInt(res.LastReadSeq, 10)})
}

// onTyping hands a typing indicator to the Service, which throttles it and
// tells the members online; nothing is stored. Over the typing rate limit
// a QoS 0 indicator is dropped silently: an error event per keystroke would
// cost more than the indicator.
func (h *Chat) onTyping(cl *mqtt.Client, pk packets.Packet, ci *clientInfo, conv int64) (packets.Packet, error) {
	if len(pk.Payload) > 256 {
		return h.fail(cl, pk, ci, "typing", chat.Errorf(chat.CodeInvalid, "typing payload must be {}"), conv, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	if err := h.cfg.Service.Typing(ctx, conv, ci.userID); err != nil {
		if pk.FixedHeader.Qos == 0 && chat.ErrorCode(err) == chat.CodeRateLimited {
			h.cfg.Metrics.Publishes.WithLabelValues("typing", string(chat.CodeRateLimited)).Inc()
			pk.Ignore = true
			return pk, nil
		}
		return h.fail(cl, pk, ci, "typing", err, conv, "")
	}
	return h.ok("typing", pk)
}

// onRPC answers an MQTT v5 request on the caller's response topic with the
// same Correlation Data; the reply JSON is the HTTP API's.
func (h *Chat) onRPC(cl *mqtt.Client, pk packets.Packet, ci *clientInfo, method string) (packets.Packet, error) {
	if !isV5(cl) {
		return h.fail(cl, pk, ci, "rpc", chat.Errorf(chat.CodeInvalid, "request/response needs MQTT v5 (Response Topic)"), 0, "")
	}
	rt := pk.Properties.ResponseTopic
	if rt == "" {
		return h.fail(cl, pk, ci, "rpc", chat.Errorf(chat.CodeInvalid, "set a Response Topic under %s", UserTree(ci.userID)), 0, "")
	}
	if !ResponseTopicAllowed(ci.userID, rt) {
		return h.fail(cl, pk, ci, "rpc", chat.Errorf(chat.CodeForbidden, "response topic must be under %s", UserTree(ci.userID)), 0, "")
	}
	if h.cfg.RPC == nil {
		return h.fail(cl, pk, ci, "rpc", chat.Errorf(chat.CodeNotFound, "request/response is not enabled"), 0, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	reply := h.cfg.RPC(ctx, ci.userID, method, pk.Payload)
	corr := append([]byte(nil), pk.Properties.CorrelationData...)
	h.cfg.Hub.SendDirect(cl.ID, delivery.Packet{Topic: rt, Payload: reply, QoS: 1, CorrelationData: corr})
	return h.ok("rpc", pk)
}
