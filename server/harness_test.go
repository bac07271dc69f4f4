package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if chatdBin.dir != "" {
		os.RemoveAll(chatdBin.dir)
	}
	os.Exit(code)
}

// startNode starts a chatd node on loopback ports against url.
func startNode(t testing.TB, url string, env map[string]string, opts ...server.Option) *server.Server {
	t.Helper()
	return testnode.Start(t, nodeEnv(t, url, env), nil, opts...)
}

// withNodeID is env with CHAT_NODE_ID id: nodes that run at once on one
// database need ids of their own (the default, hostname-pid, is one per
// test process).
func withNodeID(env map[string]string, id string) map[string]string {
	out := map[string]string{"CHAT_NODE_ID": id}
	for k, v := range env {
		if k != "CHAT_NODE_ID" {
			out[k] = v
		}
	}
	return out
}

// nodeEnv is the settings of this package's test nodes, env on top.
func nodeEnv(t testing.TB, url string, env map[string]string) map[string]string {
	t.Helper()
	return testnode.SecretEnv(t, url, map[string]string{
		// Tests that are not about rate limits run without them; the
		// rate-limit tests set the ones they exercise.
		"CHAT_LIMIT_TYPING_RATE": "0",
		// CI runs packages in parallel under -race on two cores: give a
		// send more than the production 5 s before it answers "retry".
		"CHAT_SEND_TIMEOUT": "20s",
		// Presence events would interleave with what other tests expect;
		// the presence tests turn them on.
		"CHAT_PRESENCE_PUSH": "false",
	}, env)
}

// mustGroup creates a group on srv as creator with members.
func mustGroup(t testing.TB, ctx context.Context, srv *server.Server, creator int64, title string, members []int64) chat.Conversation {
	t.Helper()
	conv, err := srv.Service.CreateGroup(ctx, creator, title, members)
	if err != nil {
		t.Fatal(err)
	}
	return conv
}

// mustSendAs commits a text message of sender's to conv through srv's
// service, not over MQTT.
func mustSendAs(t testing.TB, srv *server.Server, conv, sender int64, body string) {
	t.Helper()
	if _, err := srv.Service.Send(context.Background(), chat.SendRequest{ConversationID: conv, SenderID: sender, ClientMsgID: newID(), Body: body}); err != nil {
		t.Fatal(err)
	}
}

// mustDirect opens (or finds) the direct conversation of a and b on srv.
func mustDirect(t testing.TB, ctx context.Context, srv *server.Server, a, b int64) chat.Conversation {
	t.Helper()
	conv, _, err := srv.Service.OpenDirect(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	return conv
}

// startDirect starts a node with env on a fresh database and opens the
// direct conversation of users 1 and 2 on it, the setup most one-to-one
// tests share.
func startDirect(t *testing.T, env map[string]string) (*server.Server, chat.Conversation) {
	t.Helper()
	srv := startNode(t, pgtest.NewDB(t), env)
	return srv, mustDirect(t, context.Background(), srv, 1, 2)
}

// disconnect sends DISCONNECT on c and waits until srv has parked the
// session of clientID.
func disconnect(t *testing.T, srv *server.Server, c *mqtttest.Client, clientID string) {
	t.Helper()
	c.Disconnect()
	testkit.WaitFor(t, 5*time.Second, "session "+clientID+" parked", func() bool { return srv.Hub.Session(clientID) == nil })
}

// parkSession connects clientID as a persistent session of user and
// disconnects it, leaving it parked on srv, and returns conv's last seq at
// that moment: what the session misses from then on follows it.
func parkSession(t *testing.T, srv *server.Server, user int64, clientID string, v byte, conv int64) (before int64) {
	t.Helper()
	c := rawClient(t, srv.MQTTAddr(), user, clientID, v, false)
	disconnect(t, srv, c, clientID)
	return lastSeq(srv, conv)
}

// restartNode closes srv gracefully and starts a node again on url with env,
// as a restart of the same node.
func restartNode(t *testing.T, srv *server.Server, url string, env map[string]string) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	return startNode(t, url, env)
}

// lastSeq is the last seq of conv as srv's database has it (0 when it
// cannot be read).
func lastSeq(srv *server.Server, conv int64) int64 {
	var n int64
	_ = srv.Pool.QueryRow(context.Background(), "SELECT last_seq FROM conversation WHERE id=$1", conv).Scan(&n)
	return n
}

// httpReply is an answer of the node's HTTP API.
type httpReply struct {
	status int
	header http.Header
	body   []byte
}

// request is one HTTP request to srv (path starting with /) or to the URL
// path: as user (0: anonymous), with body as JSON (raw when a []byte) and
// the headers hdr. Redirects are answered, not followed.
func request(t *testing.T, srv *server.Server, user int64, method, path string, body any, hdr map[string]string) httpReply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	url := path
	if strings.HasPrefix(path, "/") {
		url = "http://" + srv.HTTPAddr() + path
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if user > 0 {
		req.Header.Set("Authorization", "Bearer "+testnode.Token(t, user))
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{status: resp.StatusCode, header: resp.Header, body: b}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// httpDo calls the node's HTTP API as user with body as JSON (when not
// nil).
func httpDo(t *testing.T, srv *server.Server, user int64, method, path string, body any) httpReply {
	t.Helper()
	var hdr map[string]string
	if body != nil {
		hdr = map[string]string{"Content-Type": "application/json"}
	}
	return request(t, srv, user, method, path, body, hdr)
}

// api is httpDo decoding a successful answer into out (when not nil); it
// returns the status.
func api(t *testing.T, srv *server.Server, user int64, method, path string, body any, out any) int {
	t.Helper()
	r := httpDo(t, srv, user, method, path, body)
	if out != nil && r.status < 300 && len(r.body) > 0 {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, r.body)
		}
	}
	return r.status
}

// rawClient connects a raw MQTT client (v is 4 or 5) for user and subscribes
// to its events topic.
func rawClient(t *testing.T, addr string, user int64, clientID string, v byte, clean bool) *mqtttest.Client {
	t.Helper()
	c, _ := dialAs(t, addr, user, clientID, v, clean)
	codes, err := c.Subscribe(testnode.EventsTopic(user))
	if err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		t.Fatalf("subscribe events: %v %v", codes, err)
	}
	return c
}

// dialAs connects a raw MQTT client (v is 4 or 5) as clientID of user,
// with a clean session or a persistent one (expiryFor), subscribing to
// nothing; it is dropped at the end of the test.
func dialAs(t *testing.T, addr string, user int64, clientID string, v byte, clean bool) (*mqtttest.Client, packets.Packet) {
	t.Helper()
	c, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: v, ClientID: clientID, Username: fmt.Sprint(user),
		Password: testnode.Token(t, user), Clean: clean, Expiry: expiryFor(v, clean)})
	if err != nil {
		t.Fatalf("connect %s as user %d (clean %v): %v", clientID, user, clean, err)
	}
	t.Cleanup(c.Drop)
	return c, ack
}

func expiryFor(v byte, clean bool) uint32 {
	if v == 5 && !clean {
		return 3600
	}
	return 0
}

// event is the union of event fields tests look at.
type event struct {
	Type           string `json:"type"`
	ConversationID int64  `json:"conversationId"`
	Seq            int64  `json:"seq"`
	SenderID       int64  `json:"senderId"`
	ClientMsgID    string `json:"clientMsgId"`
	Body           string `json:"body"`
	UserID         int64  `json:"userId"`
	Code           string `json:"code"`
	Message        string `json:"message"`
	RetryAfter     int64  `json:"retryAfter"`
}

// nextPublish waits for the next publish on a raw client that match
// accepts, skipping the others; what names it when the connection closes
// or none arrives within timeout.
func nextPublish(t *testing.T, c *mqtttest.Client, what string, timeout time.Duration, match func(packets.Packet) bool) packets.Packet {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case pk, ok := <-c.Publishes:
			if !ok {
				t.Fatalf("connection closed while waiting for %s: %v", what, c.Err)
			}
			if match(pk) {
				return pk
			}
		case <-deadline:
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

// nextReply waits for the reply on a raw client to the RPC request that
// carried correlation data corr.
func nextReply(t *testing.T, c *mqtttest.Client, what string, timeout time.Duration, corr []byte) packets.Packet {
	t.Helper()
	return nextPublish(t, c, what, timeout, func(pk packets.Packet) bool { return bytes.Equal(pk.Properties.CorrelationData, corr) })
}

// nextEvent waits for the next event of type typ on a raw client.
func nextEvent(t *testing.T, c *mqtttest.Client, typ string, timeout time.Duration) event {
	t.Helper()
	var ev event
	nextPublish(t, c, typ+" event", timeout, func(pk packets.Packet) bool {
		ev = event{}
		if err := json.Unmarshal(pk.Payload, &ev); err != nil {
			t.Fatalf("bad event payload %q: %v", pk.Payload, err)
		}
		return ev.Type == typ
	})
	return ev
}

// noPublish reads what c receives for d and fails, saying what, on a
// publish whose payload is bad.
func noPublish(t *testing.T, c *mqtttest.Client, d time.Duration, what string, bad func(payload []byte) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case pk, ok := <-c.Publishes:
			if !ok {
				return
			}
			if bad(pk.Payload) {
				t.Fatalf("%s: %s", what, pk.Payload)
			}
		case <-deadline:
			return
		}
	}
}

// noMessagesOf fails on a message.new of conv that c receives within d:
// what a client must no longer get.
func noMessagesOf(t *testing.T, c *mqtttest.Client, conv int64, d time.Duration, what string) {
	t.Helper()
	noPublish(t, c, d, what, func(payload []byte) bool {
		var ev event
		return json.Unmarshal(payload, &ev) == nil && ev.Type == chat.EventMessageNew && ev.ConversationID == conv
	})
}

// collectMessages reads message.new events of conv until n arrived.
func collectMessages(t *testing.T, c *mqtttest.Client, conv int64, n int, timeout time.Duration) []event {
	t.Helper()
	var out []event
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case pk, ok := <-c.Publishes:
			if !ok {
				t.Fatalf("connection closed after %d/%d messages: %v", len(out), n, c.Err)
			}
			var ev event
			if err := json.Unmarshal(pk.Payload, &ev); err != nil {
				t.Fatalf("bad payload: %v", err)
			}
			if ev.Type == chat.EventMessageNew && ev.ConversationID == conv {
				out = append(out, ev)
			}
		case <-deadline:
			t.Fatalf("got %d/%d messages of conversation %d within %v", len(out), n, conv, timeout)
		}
	}
	return out
}

// pahoClient is a paho.golang v5 client collecting events.
type pahoClient struct {
	*paho.Client
	mu     sync.Mutex
	events []event
	got    chan struct{}
}

func newPaho(t *testing.T, addr string, user int64, clientID string) *pahoClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc := &pahoClient{got: make(chan struct{}, 1)}
	pc.Client = paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			var ev event
			if err := json.Unmarshal(pr.Packet.Payload, &ev); err == nil {
				pc.mu.Lock()
				pc.events = append(pc.events, ev)
				pc.mu.Unlock()
				select {
				case pc.got <- struct{}{}:
				default:
				}
			}
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := pc.Connect(ctx, &paho.Connect{KeepAlive: 30, ClientID: clientID, CleanStart: true,
		Username: fmt.Sprint(user), UsernameFlag: true, Password: []byte(testnode.Token(t, user)), PasswordFlag: true})
	if err != nil || ca.ReasonCode != 0 {
		t.Fatalf("paho connect user %d: %v", user, err)
	}
	t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
	if _, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: testnode.EventsTopic(user), QoS: 1}}}); err != nil {
		t.Fatalf("paho subscribe: %v", err)
	}
	return pc
}

func (pc *pahoClient) messages(conv int64) []event {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var out []event
	for _, ev := range pc.events {
		if ev.Type == chat.EventMessageNew && ev.ConversationID == conv {
			out = append(out, ev)
		}
	}
	return out
}

func newID() string { return uuid.NewString() }

// assertInOrder checks seqs are exactly from..to.
func assertInOrder(t *testing.T, evs []event, from int64) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (order or gap broken)", i, ev.Seq, from+int64(i))
		}
	}
}

// pahoConn is a bare paho.golang v5 connection for protocol tests: the
// DISCONNECT the server sends, if any, arrives on disconnect.
type pahoConn struct {
	*paho.Client
	disconnect chan *paho.Disconnect
}

// dialPaho connects user over MQTT 5 with paho (keepalive 30 s, clean
// start); setup, when not nil, may change the client's configuration and
// its CONNECT first.
func dialPaho(t *testing.T, addr string, user int64, clientID string, setup func(*paho.ClientConfig, *paho.Connect)) (*pahoConn, *paho.Connack) {
	t.Helper()
	pc, ca, err := connectPaho(t, addr, user, clientID, setup)
	if err != nil {
		t.Fatalf("paho connect user %d: %v", user, err)
	}
	return pc, ca
}

// dialPahoReceiving is dialPaho with every PUBLISH the client receives
// (acknowledged) put on the channel returned, which holds 64.
func dialPahoReceiving(t *testing.T, addr string, user int64, clientID string) (*pahoConn, *paho.Connack, chan *paho.Publish) {
	t.Helper()
	got := make(chan *paho.Publish, 64)
	pc, ca := dialPaho(t, addr, user, clientID, func(cfg *paho.ClientConfig, _ *paho.Connect) {
		cfg.OnPublishReceived = append(cfg.OnPublishReceived, func(pr paho.PublishReceived) (bool, error) {
			got <- pr.Packet
			return true, nil
		})
	})
	return pc, ca, got
}

// connectPaho is dialPaho returning a refusal (the CONNACK, when one came,
// and an error) rather than failing the test.
func connectPaho(t *testing.T, addr string, user int64, clientID string, setup func(*paho.ClientConfig, *paho.Connect)) (*pahoConn, *paho.Connack, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc := &pahoConn{disconnect: make(chan *paho.Disconnect, 1)}
	cfg := paho.ClientConfig{Conn: conn, OnServerDisconnect: func(d *paho.Disconnect) { pc.disconnect <- d }}
	cp := &paho.Connect{KeepAlive: 30, ClientID: clientID, CleanStart: true,
		Username: fmt.Sprint(user), UsernameFlag: true, Password: []byte(testnode.Token(t, user)), PasswordFlag: true}
	if setup != nil {
		setup(&cfg, cp)
	}
	pc.Client = paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := pc.Connect(ctx, cp)
	if err != nil {
		_ = conn.Close()
		return nil, ca, err
	}
	t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
	return pc, ca, nil
}

// serverDisconnect waits for the DISCONNECT the server sends pc, and for
// its connection to end.
func (pc *pahoConn) serverDisconnect(t *testing.T, what string) *paho.Disconnect {
	t.Helper()
	select {
	case d := <-pc.disconnect:
		testkit.Receive(t, pc.Done(), 5*time.Second, fmt.Sprintf("%s: the connection is still open after the DISCONNECT", what))
		return d
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no DISCONNECT from the server", what)
		return nil
	}
}

// publish1 publishes payload at QoS 1 with paho and returns the PUBACK
// (with an error too when its reason code is a refusal), or only an error
// when none came.
func (pc *pahoConn) publish1(topic string, payload []byte, props *paho.PublishProperties) (*paho.PublishResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// paho waits out the timeout for a PUBACK on a connection that has
	// ended. A PUBACK read before the end already waits for Publish, which
	// takes it at once: give up a second after the end.
	go func() {
		select {
		case <-pc.Done():
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(time.Second):
			cancel()
		case <-ctx.Done():
		}
	}()
	return pc.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: payload, Properties: props})
}
