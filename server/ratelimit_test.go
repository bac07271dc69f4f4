package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// startNodeLogged is startNode with the node's log records also handed to h.
func startNodeLogged(t *testing.T, url string, env map[string]string, h slog.Handler) *server.Server {
	t.Helper()
	base := nodeEnv(t, url, env)
	if _, set := env["CHAT_SEND_TIMEOUT"]; !set {
		delete(base, "CHAT_SEND_TIMEOUT") // these nodes keep the production send timeout
	}
	stderr := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	return testnode.Start(t, base, teeHandler{stderr, h})
}

type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}
func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if t.a.Enabled(ctx, r.Level) {
		_ = t.a.Handle(ctx, r.Clone())
	}
	if t.b.Enabled(ctx, r.Level) {
		_ = t.b.Handle(ctx, r.Clone())
	}
	return nil
}
func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}
func (t teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{t.a.WithGroup(g), t.b.WithGroup(g)}
}

// TestSendRateLimitWithDefaults: with the default limit (10 messages per
// second, burst 30), a client publishing 100 messages within one second
// gets the first 30 plus the refill committed and PUBACK 0x97 for the rest,
// none of which is stored; after a pause it sends again; another user of
// the same conversation is not affected.
func TestSendRateLimitWithDefaults(t *testing.T) {
	srv, conv := startDirect(t, map[string]string{
		"CHAT_LIMIT_SEND_RATE": "10", "CHAT_LIMIT_SEND_BURST": "30",
		"CHAT_LIMIT_CONV_RATE": "100", "CHAT_LIMIT_CONV_BURST": "200",
	})
	a := rawClient(t, srv.MQTTAddr(), 1, "flood-1", 5, true)
	b := rawClient(t, srv.MQTTAddr(), 2, "calm-2", 5, true)

	var ok, refused int
	var firstRefused = -1
	// The bucket refills between the server's checks of the first and the
	// last publish, which lie between these instants (a publish waits for
	// its PUBACK): a loaded machine can stretch the round trips, so the
	// window is bounded from both sides rather than taken as the loop's.
	var firstSent, firstAcked, lastSent, lastAcked time.Time
	start := time.Now()
	for i := range 100 {
		// Paced over one second: 100 publishes, one every 10ms.
		time.Sleep(time.Until(start.Add(time.Duration(i) * 10 * time.Millisecond)))
		sentAt := time.Now()
		ack, err := a.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), fmt.Sprintf("m%d", i)))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		switch i {
		case 0:
			firstSent, firstAcked = sentAt, time.Now()
		case 99:
			lastSent, lastAcked = sentAt, time.Now()
		}
		switch ack.ReasonCode {
		case 0:
			ok++
		case 0x97:
			refused++
			if firstRefused < 0 {
				firstRefused = i
			}
			if !strings.Contains(ack.Properties.ReasonString, "rate limited") {
				t.Fatalf("0x97 without a reason string: %q", ack.Properties.ReasonString)
			}
		default:
			t.Fatalf("publish %d: reason 0x%02x", i, ack.ReasonCode)
		}
	}
	elapsed := time.Since(start).Seconds()
	least, most := 10*lastSent.Sub(firstAcked).Seconds(), 10*lastAcked.Sub(firstSent).Seconds()
	t.Logf("100 sends in %.2fs: %d committed, %d refused (first refused #%d)", elapsed, ok, refused, firstRefused+1)
	if firstRefused < 30 {
		t.Fatalf("send #%d refused, within the burst of 30", firstRefused+1)
	}
	if float64(ok) < 30+least-1 || float64(ok) > 30+most+1 {
		t.Fatalf("%d committed, want 30 + %.1f to %.1f refilled", ok, least, most)
	}
	if ok+refused != 100 {
		t.Fatalf("%d + %d != 100", ok, refused)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != ok {
		t.Fatalf("%d messages stored, %d acknowledged: refused sends must not be stored", n, ok)
	}
	// The other member is not limited by user 1's bucket.
	for i := range 20 {
		ack, err := b.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "calm"))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("user 2 send %d: reason 0x%02x %v", i, ack.ReasonCode, err)
		}
	}
	// A pause refills user 1's bucket.
	time.Sleep(1100 * time.Millisecond)
	for i := range 10 {
		ack, err := a.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "again"))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("send %d after a pause: reason 0x%02x %v", i, ack.ReasonCode, err)
		}
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != ok+30 {
		t.Fatalf("%d messages stored, want %d", n, ok+30)
	}
	var limited float64
	mfs, _ := srv.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "chat_rate_limited_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "send" {
					limited = m.GetCounter().GetValue()
				}
			}
		}
	}
	if int(limited) != refused {
		t.Fatalf("chat_rate_limited_total{kind=send} = %v, want %d", limited, refused)
	}
}

// TestRateLimitedV311IsAckedDroppedAndReported: MQTT 3.1.1 has no PUBACK
// reason codes: an over-limit send is acknowledged, not stored, and an
// error event with code rate_limited follows.
func TestRateLimitedV311IsAckedDroppedAndReported(t *testing.T) {
	srv, conv := startDirect(t, map[string]string{"CHAT_LIMIT_SEND_RATE": "0.01", "CHAT_LIMIT_SEND_BURST": "2"})
	c := rawClient(t, srv.MQTTAddr(), 1, "v311-1", 4, true)
	ids := []string{newID(), newID(), newID()}
	for _, id := range ids {
		if _, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(id, "x")); err != nil {
			t.Fatalf("publish: %v (3.1.1 must get a PUBACK)", err)
		}
	}
	ev := nextEvent(t, c, chat.EventError, 5*time.Second)
	if ev.Code != "rate_limited" || ev.ClientMsgID != ids[2] || ev.ConversationID != conv.ID || !strings.Contains(ev.Message, "rate limited") {
		t.Fatalf("error event %+v", ev)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
		t.Fatalf("%d stored, want the 2 within the burst", n)
	}
	// The connection stays usable: a resend of a committed message is a
	// duplicate, refunded, and still answered.
	if _, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(ids[0], "x")); err != nil {
		t.Fatal(err)
	}
}

// TestConversationRateLimitCapsAllSenders: the per-conversation limit holds
// whoever sends; other conversations are not affected.
func TestConversationRateLimitCapsAllSenders(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONV_RATE": "0.01", "CHAT_LIMIT_CONV_BURST": "5"})
	ctx := context.Background()
	hot := mustGroup(t, ctx, srv, 1, "hot", []int64{2, 3})
	quiet := mustDirect(t, ctx, srv, 1, 2)
	clients := []*mqtttest.Client{
		rawClient(t, srv.MQTTAddr(), 1, "hot-1", 5, true),
		rawClient(t, srv.MQTTAddr(), 2, "hot-2", 5, true),
		rawClient(t, srv.MQTTAddr(), 3, "hot-3", 5, true),
	}
	ok := 0
	for i := range 12 {
		ack, err := clients[i%3].Publish(testnode.MsgTopic(hot.ID), 1, testnode.SendPayload(newID(), "hot"))
		if err != nil {
			t.Fatal(err)
		}
		switch ack.ReasonCode {
		case 0:
			ok++
		case 0x97:
			if !strings.Contains(ack.Properties.ReasonString, "conversation") {
				t.Fatalf("reason %q does not name the conversation limit", ack.Properties.ReasonString)
			}
		default:
			t.Fatalf("reason 0x%02x", ack.ReasonCode)
		}
	}
	if ok != 5 || countMessages(t, srv.Pool, hot.ID) != 5 {
		t.Fatalf("%d committed in the hot conversation, want its burst 5", ok)
	}
	// Another conversation has a bucket of its own.
	for i := range 5 {
		ack, err := clients[0].Publish(testnode.MsgTopic(quiet.ID), 1, testnode.SendPayload(newID(), "quiet"))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("send %d to another conversation: 0x%02x %v", i, ack.ReasonCode, err)
		}
	}
}

// TestConnectRateLimitPerIP: connection attempts per IP are limited before
// the token is looked at: CONNACK 0x9F for v5, 0x03 for 3.1.1.
func TestConnectRateLimitPerIP(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONNECT_RATE": "0.01", "CHAT_LIMIT_CONNECT_BURST": "3"})
	for i := range 3 {
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("c%d", i), Password: "not even a token", Clean: true})
		if err == nil {
			c.Drop()
			t.Fatal("bad token accepted")
		}
		if !strings.Contains(err.Error(), "0x86") {
			t.Fatalf("attempt %d: %v, want the token refused (0x86) within the burst", i, err)
		}
	}
	_, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "c4", Password: testnode.Token(t, 1), Clean: true})
	if err == nil || ack.ReasonCode != packets.ErrConnectionRateExceeded.Code {
		t.Fatalf("4th attempt (v5): %v reason 0x%02x, want 0x9F", err, ack.ReasonCode)
	}
	_, ack, err = mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 4, ClientID: "c5", Password: testnode.Token(t, 1), Clean: true})
	if err == nil || ack.ReasonCode != 0x03 {
		t.Fatalf("5th attempt (3.1.1): %v reason 0x%02x, want 0x03", err, ack.ReasonCode)
	}
}

func headerInt(t *testing.T, h http.Header, name string) int {
	t.Helper()
	n, err := strconv.Atoi(h.Get(name))
	if err != nil {
		t.Fatalf("header %s = %q", name, h.Get(name))
	}
	return n
}

// TestHTTP429CarriesRetryAfterAndRateLimitHeaders covers the send limit
// over HTTP (a duplicate resend is not charged), the per-user API limit over
// HTTP, and the same API budget over MQTT RPC.
func TestHTTP429CarriesRetryAfterAndRateLimitHeaders(t *testing.T) {
	srv, conv := startDirect(t, map[string]string{
		"CHAT_LIMIT_SEND_RATE": "0.5", "CHAT_LIMIT_SEND_BURST": "2",
		"CHAT_LIMIT_API_RATE": "0.2", "CHAT_LIMIT_API_BURST": "8",
	})
	path := fmt.Sprintf("/v1/conversations/%d/messages", conv.ID)
	first := map[string]string{"clientMsgId": newID(), "body": "one"}
	if r := httpDo(t, srv, 1, "POST", path, first); r.status != 201 {
		t.Fatalf("first send: %d %s", r.status, r.body)
	}
	if r := httpDo(t, srv, 1, "POST", path, first); r.status != 200 {
		t.Fatalf("duplicate resend: %d %s (must not be charged)", r.status, r.body)
	}
	if r := httpDo(t, srv, 1, "POST", path, map[string]string{"clientMsgId": newID(), "body": "two"}); r.status != 201 {
		t.Fatalf("second send: %d %s (the duplicate was charged)", r.status, r.body)
	}
	r := httpDo(t, srv, 1, "POST", path, map[string]string{"clientMsgId": newID(), "body": "three"})
	if r.status != 429 {
		t.Fatalf("third send: %d %s, want 429", r.status, r.body)
	}
	var body struct {
		Error struct {
			Code       string `json:"code"`
			Message    string `json:"message"`
			RetryAfter int    `json:"retryAfter"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error.Code != "rate_limited" {
		t.Fatalf("429 body %s", r.body)
	}
	retry, limit, remaining, reset := headerInt(t, r.header, "Retry-After"), headerInt(t, r.header, "X-RateLimit-Limit"),
		headerInt(t, r.header, "X-RateLimit-Remaining"), headerInt(t, r.header, "X-RateLimit-Reset")
	t.Logf("429: Retry-After %d, X-RateLimit-Limit %d, -Remaining %d, -Reset %d; %s", retry, limit, remaining, reset, body.Error.Message)
	// An empty bucket of 2 at 0.5/s: a token in up to 2s, full in up to 4s.
	if limit != 2 || remaining != 0 || retry < 1 || retry > 2 || reset < 3 || reset > 4 || body.Error.RetryAfter != retry {
		t.Fatalf("429 headers: Retry-After %d, Limit %d, Remaining %d, Reset %d, body retryAfter %d",
			retry, limit, remaining, reset, body.Error.RetryAfter)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
		t.Fatalf("%d stored, want 2", n)
	}

	// The API budget (8 at once) is shared by HTTP and RPC: 4 requests were
	// made above; 3 more over HTTP, 1 over RPC, then both are refused.
	for i := range 3 {
		if r := httpDo(t, srv, 1, "GET", "/v1/inbox", nil); r.status != 200 {
			t.Fatalf("inbox %d: %d %s", i, r.status, r.body)
		}
	}
	rpc := rawClient(t, srv.MQTTAddr(), 1, "rpc-1", 5, true)
	call := func() map[string]any {
		t.Helper()
		if _, err := rpc.Publish("chat/v1/rpc/inbox", 1, []byte(`{}`), mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/1/rpc", CorrelationData: []byte("c")}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case pk := <-rpc.Publishes:
				if pk.TopicName != "chat/v1/user/1/rpc" {
					continue
				}
				var m map[string]any
				_ = json.Unmarshal(pk.Payload, &m)
				return m
			case <-time.After(5 * time.Second):
				t.Fatal("no RPC reply")
			}
		}
	}
	if m := call(); m["status"] != 200.0 {
		t.Fatalf("RPC within the API budget: %v", m)
	}
	if m := call(); m["status"] != 429.0 || m["error"].(map[string]any)["code"] != "rate_limited" || m["error"].(map[string]any)["retryAfter"].(float64) < 1 {
		t.Fatalf("RPC over the API budget: %v", m)
	}
	r = httpDo(t, srv, 1, "GET", "/v1/inbox", nil)
	if r.status != 429 || headerInt(t, r.header, "X-RateLimit-Limit") != 8 || r.header.Get("Retry-After") == "" {
		t.Fatalf("inbox over the API budget: %d %v %s", r.status, r.header, r.body)
	}
	// Another user has a budget of their own.
	if r := httpDo(t, srv, 2, "GET", "/v1/inbox", nil); r.status != 200 {
		t.Fatalf("user 2 inbox: %d", r.status)
	}
}

// TestRateLimitHoldsAcrossNodesWithRedis: two nodes sharing Redis enforce
// one budget per user; with Redis stopped, sends go on under each node's
// local limit, and the fallback is logged once, not per request.
func TestRateLimitHoldsAcrossNodesWithRedis(t *testing.T) {
	redisURL, stopRedis := redistest.Start(t)
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_REDIS_URL": redisURL, "CHAT_LIMIT_SEND_RATE": "0.01", "CHAT_LIMIT_SEND_BURST": "10"}
	logsA, logsB := &logtest.Counter{}, &logtest.Counter{}
	envA, envB := map[string]string{"CHAT_NODE_ID": "rl-a"}, map[string]string{"CHAT_NODE_ID": "rl-b"}
	for k, v := range env {
		envA[k], envB[k] = v, v
	}
	a := startNodeLogged(t, url, envA, logsA)
	b := startNodeLogged(t, url, envB, logsB)
	conv := mustDirect(t, context.Background(), a, 1, 2)
	onA := rawClient(t, a.MQTTAddr(), 1, "phone-1", 5, true)
	onB := rawClient(t, b.MQTTAddr(), 1, "laptop-1", 5, true)
	send := func(c *mqtttest.Client) bool {
		t.Helper()
		ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "x"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.ReasonCode != 0 && ack.ReasonCode != 0x97 {
			t.Fatalf("reason 0x%02x", ack.ReasonCode)
		}
		return ack.ReasonCode == 0
	}
	okA, okB := 0, 0
	for range 15 {
		if send(onA) {
			okA++
		}
		if send(onB) {
			okB++
		}
	}
	t.Logf("with Redis: node A committed %d, node B %d of 15 each", okA, okB)
	if okA+okB != 10 || okA == 0 || okB == 0 {
		t.Fatalf("committed %d on A and %d on B, want 10 together (one shared burst)", okA, okB)
	}
	if !a.Limiter.Shared() || !b.Limiter.Shared() {
		t.Fatal("limiters not shared through Redis")
	}

	stopRedis()
	okA = 0
	for range 30 {
		if send(onA) {
			okA++
		}
	}
	t.Logf("Redis stopped: node A committed %d of 30 under its local limit", okA)
	if okA != 10 {
		t.Fatalf("node A committed %d of 30 without Redis, want its local burst of 10", okA)
	}
	if n := countMessages(t, a.Pool, conv.ID); n != 20 {
		t.Fatalf("%d stored, want 20", n)
	}
	if n := logsA.Count("redis unreachable"); n != 1 {
		t.Fatalf("node A logged the Redis fallback %d times over 30 requests, want once", n)
	}
	if n := logsB.Count("redis unreachable"); n != 0 {
		t.Fatalf("node B, which made no request since, logged the fallback %d times", n)
	}
}

// TestOutsidersCannotSpendAConversationsSendLimit: sends into a
// conversation by users who are not in it are refused (0x87 not_member)
// and do not take the conversation's tokens: its members can still send.
func TestOutsidersCannotSpendAConversationsSendLimit(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONV_RATE": "0.01", "CHAT_LIMIT_CONV_BURST": "3"})
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "ours", []int64{2})
	for _, outsider := range []int64{8, 9} {
		c := rawClient(t, srv.MQTTAddr(), outsider, fmt.Sprintf("outsider-%d", outsider), 5, true)
		for i := range 3 {
			ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "let me in"))
			if err != nil || ack.ReasonCode != 0x87 {
				t.Fatalf("outsider %d's send %d: 0x%02x %v, want 0x87 not_member", outsider, i+1, ack.ReasonCode, err)
			}
		}
		// Over HTTP too.
		if r := httpDo(t, srv, outsider, "POST", fmt.Sprintf("/v1/conversations/%d/messages", conv.ID),
			map[string]any{"clientMsgId": newID(), "body": "let me in"}); r.status != 403 {
			t.Fatalf("outsider %d's HTTP send: %d %s, want 403", outsider, r.status, r.body)
		}
	}
	member := rawClient(t, srv.MQTTAddr(), 2, "member-2", 5, true)
	for i := range 3 {
		ack, err := member.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "still ours"))
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("member's send %d after the outsiders: 0x%02x %q %v, want accepted", i+1, ack.ReasonCode, ack.Properties.ReasonString, err)
		}
	}
}

// A v5 publish or connect refused for a rate limit says when to retry in a
// form a program reads, as HTTP's Retry-After and RPC's error.retryAfter
// do, in the same whole seconds (at least 1): PUBACK 0x97 and CONNACK 0x9F
// carry the user property retryAfter, and the error event of a refused
// QoS 0 send the field retryAfter.
func TestARateLimitedV5PublishOrConnectSaysWhenToRetry(t *testing.T) {
	srv, conv := startDirect(t, map[string]string{"CHAT_LIMIT_SEND_RATE": "0.2", "CHAT_LIMIT_SEND_BURST": "2",
		"CHAT_LIMIT_CONNECT_USER_RATE": "0.1", "CHAT_LIMIT_CONNECT_USER_BURST": "2"})
	pc, _ := dialPaho(t, srv.MQTTAddr(), 1, "retry-paho", nil)
	for i := range 2 {
		if ack, err := pc.publish1(testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), "within the burst"), nil); err != nil {
			t.Fatalf("send %d: %+v %v", i, ack, err)
		}
	}
	ack, _ := pc.publish1(testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), "over"), nil)
	if ack == nil || ack.ReasonCode != 0x97 {
		t.Fatalf("a send over the limit: %+v, want PUBACK 0x97", ack)
	}
	// 0.2 tokens a second, the bucket just emptied: a token is back in at
	// most 5 s.
	if got := ack.Properties.User.Get("retryAfter"); got != "5" && got != "4" {
		t.Errorf("PUBACK 0x97 user property retryAfter %q, want 5 (s); properties %+v", got, ack.Properties.User)
	}

	raw := rawClient(t, srv.MQTTAddr(), 1, "retry-raw", 5, true)
	if _, err := raw.Publish(testnode.MsgTopic(conv.ID), 0, testnode.SendPayload(newID(), "over at QoS 0")); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, raw, chat.EventError, 5*time.Second); ev.Code != "rate_limited" || ev.RetryAfter < 1 || ev.RetryAfter > 5 {
		t.Errorf("QoS 0 send over the limit: error event %+v, want rate_limited with retryAfter 1-5", ev)
	}

	// Two connects of user 1 took its connect burst.
	_, ca, err := connectPaho(t, srv.MQTTAddr(), 1, "retry-third", nil)
	if err == nil || ca == nil || ca.ReasonCode != 0x9F {
		t.Fatalf("a connect over the user's connect rate: %+v %v, want CONNACK 0x9F", ca, err)
	}
	if got := ca.Properties.User.Get("retryAfter"); got != "10" && got != "9" {
		t.Errorf("CONNACK 0x9F user property retryAfter %q, want 10 (s)", got)
	}
	if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
		t.Errorf("%d messages stored, want 2", n)
	}
}
