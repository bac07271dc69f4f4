package faults_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// healthy is a pair of users exchanging messages all along an attack: the
// server must keep serving them.
type healthy struct {
	stop    atomic.Bool
	done    chan struct{}
	app     *app
	conv    int64
	mu      sync.Mutex
	sent    int
	fails   []string
	slowest time.Duration
}

func startHealthy(t *testing.T, srv *server.Server) *healthy {
	t.Helper()
	conv, _, err := srv.Service.OpenDirect(context.Background(), 901, 902)
	if err != nil {
		t.Fatal(err)
	}
	h := &healthy{done: make(chan struct{}), app: newApp("healthy receiver"), conv: conv.ID}
	keepConnected(t, device{user: 902, clientID: "healthy-902", version: 5}, h.app, srv.MQTTAddr)
	s := device{user: 901, clientID: "healthy-901", version: 5}.mustConnect(t, srv.MQTTAddr(), 5*time.Second)
	go func() {
		defer close(h.done)
		for !h.stop.Load() {
			start := time.Now()
			ack, err := s.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "still here"))
			took := time.Since(start)
			h.mu.Lock()
			h.sent++
			h.slowest = max(h.slowest, took)
			if err != nil || ack.ReasonCode != 0 {
				h.fails = append(h.fails, fmt.Sprintf("0x%02x %v", ack.ReasonCode, err))
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return h
}

// finish stops the exchange and asserts it never failed and every message
// arrived once, in order.
func (h *healthy) finish(t *testing.T) {
	t.Helper()
	h.stop.Store(true)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.fails {
		t.Errorf("healthy client's send failed during the attacks: %s", f)
	}
	want := map[int64]int64{h.conv: int64(h.sent)}
	testkit.WaitFor(t, 10*time.Second, "the healthy receiver to get every message", func() bool { return h.app.caughtUp(want) })
	h.app.assertExact(t, want)
	t.Logf("healthy pair exchanged %d messages during the attacks, none failed, slowest send %v", h.sent, h.slowest.Round(time.Millisecond))
}

type memSample struct {
	heap       uint64
	rss        int64
	goroutines int
}

func sampleMem(t *testing.T) memSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapInuse, rss: vmRSS(t, os.Getpid()), goroutines: runtime.NumGoroutine()}
}

func (m memSample) String() string {
	return fmt.Sprintf("heap in use %s, RSS %s, %d goroutines", mib(int64(m.heap)), mib(m.rss), m.goroutines)
}

// attacker dials a fresh raw client of user 1.
func attacker(t *testing.T, addr string, v byte) *mqtttest.Client {
	t.Helper()
	c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: v, ClientID: fmt.Sprintf("attacker-%d-%s", v, newID()[:8]),
		Password: testnode.Token(t, 1), Clean: true, ReadBuffer: 64})
	if err != nil {
		t.Fatalf("attacker connect: %v", err)
	}
	t.Cleanup(c.Drop)
	return c
}

// expectPuback publishes at QoS 1 and checks the documented outcome: v5 the
// reason code, v3.1.1 a PUBACK and, if errCode is set, an error event.
func expectPuback(t *testing.T, c *mqtttest.Client, topic string, payload []byte, v5Code byte, errCode string) {
	t.Helper()
	ack, err := c.Publish(topic, 1, payload)
	if err != nil {
		t.Fatalf("publish to %.60q: %v (want PUBACK)", topic, err)
	}
	if c.Version == 5 {
		if ack.ReasonCode != v5Code {
			t.Fatalf("publish to %.60q: PUBACK 0x%02x %q, want 0x%02x", topic, ack.ReasonCode, ack.Properties.ReasonString, v5Code)
		}
		if v5Code >= 0x80 && ack.Properties.ReasonString == "" {
			t.Errorf("publish to %.60q: PUBACK 0x%02x without a reason string", topic, ack.ReasonCode)
		}
		return
	}
	if errCode == "" {
		return
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case pk, ok := <-c.Publishes:
			if !ok {
				t.Fatalf("connection closed waiting for the %s error event", errCode)
			}
			var ev wireEvent
			if json.Unmarshal(pk.Payload, &ev) == nil && ev.Type == "error" {
				if ev.Code != errCode {
					t.Fatalf("error event %q, want %q", ev.Code, errCode)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no %s error event", errCode)
		}
	}
}

// expectClosed publishes and expects the server to close the connection
// (a malformed or oversized packet).
func expectClosed(t *testing.T, c *mqtttest.Client, topic string, payload []byte) {
	t.Helper()
	_, err := c.Publish(topic, 1, payload)
	if err == nil {
		t.Fatalf("publish to %.60q was acknowledged; want the connection closed", topic)
	}
	testkit.WaitFor(t, 5*time.Second, "the connection to be closed", c.Closed)
}

func httpDo(t *testing.T, method, url, tok string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

func unsignedJWT(header, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(claims)) + "."
}

func signJWT(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// attackCase is one row of the hostile-input table.
type attackCase struct {
	name string
	run  func(t *testing.T)
}

// TestHostileInputGetsItsDocumentedRefusalWhileOthersAreServed: a table of
// attacks on MQTT (both versions), HTTP and authentication. Each gets the
// refusal docs/protocol.md and docs/http.md document, a healthy pair keeps
// exchanging messages meanwhile, and the process's memory stays bounded.
func TestHostileInputGetsItsDocumentedRefusalWhileOthersAreServed(t *testing.T) {
	// RS256 keys for the alg-confusion cases: the node accepts RS256 with
	// the public key and HS256 with its secret.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	pubFile := filepath.Join(t.TempDir(), "jwt.pub")
	if err := os.WriteFile(pubFile, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	url := pgtest.NewDB(t)
	srv := startNode(t, url, map[string]string{"CHAT_JWT_PUBLIC_KEY": pubFile})
	plain := startNode(t, url, map[string]string{"CHAT_NODE_ID": "plain"}) // HS256 only; a node of its own
	g := mustGroup(t, srv.Service, "target", []int64{2})
	conv := g.ID
	addr, base := srv.MQTTAddr(), "http://"+srv.HTTPAddr()
	h := startHealthy(t, srv)
	before := sampleMem(t)

	good := func(claims jwt.MapClaims) jwt.MapClaims {
		if _, ok := claims["exp"]; !ok {
			claims["exp"] = time.Now().Add(time.Hour).Unix()
		}
		return claims
	}
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	msg := func(body string) []byte { return testnode.SendPayload(newID(), body) }
	both := []byte{5, 4}

	cases := []attackCase{
		{"MQTT packet over the Maximum Packet Size (164 KiB): connection closed", func(t *testing.T) {
			for _, v := range both {
				expectClosed(t, attacker(t, addr, v), testnode.MsgTopic(conv), msg(strings.Repeat("x", 170<<10)))
			}
		}},
		{"body over 16 KiB: 0x99 / too_large", func(t *testing.T) {
			for _, v := range both {
				expectPuback(t, attacker(t, addr, v), testnode.MsgTopic(conv), msg(strings.Repeat("x", 16385)), 0x99, "too_large")
			}
		}},
		{"60k nested arrays in body: 0x99 / invalid", func(t *testing.T) {
			p := []byte(`{"clientMsgId":"` + newID() + `","body":` + nested(30000) + `}`)
			for _, v := range both {
				expectPuback(t, attacker(t, addr, v), testnode.MsgTopic(conv), p, 0x99, "invalid")
			}
		}},
		{"60k nested arrays in an unknown field: 0x99 / invalid", func(t *testing.T) {
			p := []byte(`{"x":` + nested(30000) + `,"clientMsgId":"` + newID() + `","body":"hi"}`)
			for _, v := range both {
				expectPuback(t, attacker(t, addr, v), testnode.MsgTopic(conv), p, 0x99, "invalid")
			}
		}},
		{"invalid UTF-8: 0x99 / invalid", func(t *testing.T) {
			p := []byte("{\"clientMsgId\":\"" + newID() + "\",\"body\":\"bad \xff\xfe\"}")
			for _, v := range both {
				expectPuback(t, attacker(t, addr, v), testnode.MsgTopic(conv), p, 0x99, "invalid")
			}
		}},
		{"negative, zero, fractional and overflowing read seqs: 0x99 / invalid", func(t *testing.T) {
			for _, v := range both {
				c := attacker(t, addr, v)
				for _, p := range []string{`{"seq":-1}`, `{"seq":0}`, `{"seq":1.5}`, `{"seq":9223372036854775808}`, `{"seq":1e400}`, `{"seq":"1"}`} {
					expectPuback(t, c, testnode.ReadTopic(conv), []byte(p), 0x99, "invalid")
				}
			}
		}},
		{"max int64 read seq clamps to last_seq", func(t *testing.T) {
			c := attacker(t, addr, 5)
			ack, err := c.Publish(testnode.ReadTopic(conv), 1, []byte(`{"seq":9223372036854775807}`))
			if err != nil || ack.ReasonCode != 0 {
				t.Fatalf("0x%02x %v", ack.ReasonCode, err)
			}
		}},
		{"negative, zero, padded and huge ids in topics: 0x87 / forbidden or not_found", func(t *testing.T) {
			for _, v := range both {
				c := attacker(t, addr, v)
				for _, id := range []string{"-1", "0", "01", "1.0", "1e3", " 1", "99999999999999999999", "9223372036854775808"} {
					expectPuback(t, c, "chat/v1/conv/"+id+"/msg", msg("x"), 0x87, "forbidden")
				}
				expectPuback(t, c, "chat/v1/conv/9223372036854775807/msg", msg("x"), 0x87, "not_found")
			}
		}},
		{"topic injection: dots, other trees, long topics: 0x87 / forbidden", func(t *testing.T) {
			for _, v := range both {
				c := attacker(t, addr, v)
				for _, topic := range []string{"chat/v1/conv/1/../2/msg", "chat/v1/conv/1/msg/", "chat/v1/user/2/events", "chat/v1/conv//msg", "/chat/v1/conv/1/msg", "chat/v1/rpc/../conv/1/msg", "chat/v2/conv/1/msg", "chat/v1/" + strings.Repeat("a/", 20000)} {
					expectPuback(t, c, topic, msg("x"), 0x87, "forbidden")
				}
			}
		}},
		{"wildcards in a publish topic, empty topic: connection closed (malformed packet)", func(t *testing.T) {
			for _, v := range both {
				for _, topic := range []string{"chat/v1/conv/+/msg", "chat/v1/conv/+1/msg", "chat/v1/#", "#", ""} {
					expectClosed(t, attacker(t, addr, v), topic, msg("x"))
				}
			}
		}},
		{"$SYS topic publish: 0x87 / forbidden like any other topic", func(t *testing.T) {
			for _, v := range both {
				c := attacker(t, addr, v)
				got := make(chan error, 1)
				go func() {
					ack, err := c.Publish("$SYS/broker/clients", 1, msg("x"))
					if err == nil && c.Version == 5 && ack.ReasonCode != 0x87 {
						err = fmt.Errorf("PUBACK 0x%02x", ack.ReasonCode)
					}
					got <- err
				}()
				select {
				case err := <-got:
					if err != nil {
						t.Errorf("v%d: %v, want PUBACK 0x87 (v5) or PUBACK and a forbidden error event (v3.1.1)", v, err)
					}
				case <-time.After(3 * time.Second):
					c.Drop()
					t.Errorf("BUG: v%d publish to $SYS/broker/clients got no PUBACK within 3 s and the connection stays open: mochi's processPublish drops a publish to a $-topic before any hook runs (IsValidFilter(topic, true) is false), so a QoS 1 sender waits or resends forever instead of getting the documented 0x87", v)
				}
			}
		}},
		{"NUL in a topic: connection closed (malformed packet)", func(t *testing.T) {
			for _, v := range both {
				expectClosed(t, attacker(t, addr, v), "chat/v1/conv/1/msg\x00", msg("x"))
			}
		}},
		{"subscriptions outside the own tree: 0x87 / 0x80, shared ones 0x9E / 0x80", func(t *testing.T) {
			for _, v := range both {
				c := attacker(t, addr, v)
				want, shared := byte(0x87), byte(0x9E)
				if v == 4 {
					want, shared = 0x80, 0x80
				}
				for _, f := range []string{"#", "+/#", "chat/v1/#", "chat/v1/user/+/events", "chat/v1/user/2/events", "chat/v1/user/2/#", "chat/v1/user/12/events", "chat/v1/conv/+/msg", "$SYS/#", "$share/g/chat/v1/user/1/events", "$SHARE/g/chat/v1/user/1/events", "$Share/g/#", "chat/v1/user/01/events"} {
					w := want
					if strings.HasPrefix(strings.ToLower(f), "$share/") {
						w = shared
					}
					codes, err := c.Subscribe(f)
					if err != nil || len(codes) != 1 || codes[0] != w {
						t.Fatalf("v%d subscribe %q: %v %v, want 0x%02x", v, f, codes, err, w)
					}
				}
			}
		}},
		{"10,000 subscriptions from one client: 16 granted, the rest 0x87 / 0x80", func(t *testing.T) {
			for _, v := range both {
				c := attacker(t, addr, v)
				granted, refused := 0, 0
				for batch := 0; batch < 10; batch++ {
					filters := make([]string, 1000)
					for i := range filters {
						filters[i] = fmt.Sprintf("chat/v1/user/1/x%d", batch*1000+i)
					}
					codes, err := c.Subscribe(filters...)
					if err != nil {
						t.Fatalf("v%d subscribe batch %d: %v", v, batch, err)
					}
					for _, code := range codes {
						if code < 0x80 {
							granted++
						} else {
							refused++
						}
					}
				}
				if granted != 16 || refused != 9984 {
					t.Fatalf("v%d: %d granted, %d refused; want 16 and 9984", v, granted, refused)
				}
				// The client is still usable.
				expectPuback(t, c, testnode.MsgTopic(conv), msg("after 10k subscriptions"), 0x00, "")
			}
		}},
		{"JWT alg none: CONNACK 0x86 / 0x05", func(t *testing.T) {
			tok := unsignedJWT(`{"alg":"none","typ":"JWT"}`, fmt.Sprintf(`{"sub":"1","exp":%d}`, time.Now().Add(time.Hour).Unix()))
			expectConnRefused(t, addr, tok)
			if s, code := httpDo(t, "GET", base+"/v1/inbox", tok, nil); s != 401 || code != "unauthorized" {
				t.Fatalf("HTTP: %d %q", s, code)
			}
		}},
		{"JWT HS256 signed with the RSA public key (alg confusion): refused", func(t *testing.T) {
			tok := signJWT(t, jwt.SigningMethodHS256, pubPEM, good(jwt.MapClaims{"sub": "1"}))
			expectConnRefused(t, addr, tok)
			if s, _ := httpDo(t, "GET", base+"/v1/inbox", tok, nil); s != 401 {
				t.Fatalf("HTTP: %d", s)
			}
		}},
		{"JWT RS256 accepted only where a public key is configured", func(t *testing.T) {
			tok := signJWT(t, jwt.SigningMethodRS256, key, good(jwt.MapClaims{"sub": "1"}))
			c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "rs256", Password: tok, Clean: true, ReadBuffer: 4})
			if err != nil {
				t.Fatalf("valid RS256 token refused: %v", err)
			}
			c.Disconnect()
			expectConnRefused(t, plain.MQTTAddr(), tok)
		}},
		{"JWT subject beyond int64, zero, negative, padded: refused", func(t *testing.T) {
			for _, sub := range []string{"9223372036854775808", "18446744073709551616", "0", "-1", "01", " 1", "1e3"} {
				tok := signJWT(t, jwt.SigningMethodHS256, []byte(testnode.Secret), good(jwt.MapClaims{"sub": sub}))
				expectConnRefused(t, addr, tok)
			}
		}},
		{"replayed expired token: refused on MQTT and HTTP", func(t *testing.T) {
			tok := signJWT(t, jwt.SigningMethodHS256, []byte(testnode.Secret), jwt.MapClaims{"sub": "1", "exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix()})
			for i := 0; i < 3; i++ {
				expectConnRefused(t, addr, tok)
			}
			if s, code := httpDo(t, "GET", base+"/v1/inbox", tok, nil); s != 401 || code != "unauthorized" {
				t.Fatalf("HTTP: %d %q", s, code)
			}
		}},
		{"token over 4 KiB: refused", func(t *testing.T) {
			tok := signJWT(t, jwt.SigningMethodHS256, []byte(testnode.Secret), good(jwt.MapClaims{"sub": "1", "pad": strings.Repeat("p", 5000)}))
			expectConnRefused(t, addr, tok)
		}},
		{"HTTP: oversized, nested, invalid UTF-8 bodies and hostile ids", func(t *testing.T) {
			tok := testnode.Token(t, 1)
			msgs := fmt.Sprintf("%s/v1/conversations/%d/messages", base, conv)
			checks := []struct {
				method, url string
				body        []byte
				status      int
				code        string
			}{
				{"POST", msgs, msg(strings.Repeat("x", 200<<10)), 413, "too_large"},
				{"POST", msgs, []byte(`{"clientMsgId":"` + newID() + `","body":` + nested(50000) + `}`), 400, "invalid"},
				{"POST", msgs, []byte(`{"x":` + nested(50000) + `,"clientMsgId":"` + newID() + `","body":"hi"}`), 400, "invalid"},
				{"POST", msgs, []byte("{\"clientMsgId\":\"" + newID() + "\",\"body\":\"\xff\"}"), 400, "invalid"},
				{"POST", fmt.Sprintf("%s/v1/conversations/%d/read", base, conv), []byte(`{"seq":-5}`), 400, "invalid"},
				{"GET", base + "/v1/conversations/-1", nil, 400, "invalid"},
				{"GET", base + "/v1/conversations/99999999999999999999", nil, 400, "invalid"},
				{"GET", fmt.Sprintf("%s/v1/conversations/%d/messages?afterSeq=-1", base, conv), nil, 400, "invalid"},
				{"GET", fmt.Sprintf("%s/v1/conversations/%d/messages?afterSeq=99999999999999999999", base, conv), nil, 400, "invalid"},
				{"GET", fmt.Sprintf("%s/v1/conversations/%d/messages/-3/seen", base, conv), nil, 400, "invalid"},
				{"GET", base + "/v1/conversations/9223372036854775807", nil, 404, "not_found"},
				{"GET", fmt.Sprintf("%s/v1/conversations/0%d", base, conv), nil, 400, "invalid"},
				{"GET", fmt.Sprintf("%s/v1/conversations/%d/messages?afterSeq=01", base, conv), nil, 400, "invalid"},
			}
			for _, c := range checks {
				if s, code := httpDo(t, c.method, c.url, tok, c.body); s != c.status || code != c.code {
					t.Errorf("%s %.80s: %d %q, want %d %q", c.method, c.url, s, code, c.status, c.code)
				}
			}
		}},
	}
	cases = append(cases, hardeningCases(t, url, addr, conv)...)
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
	h.finish(t)
	pool := openPool(t, url, 1)
	checkGapless(t, pool, []int64{conv, h.conv})
	after := sampleMem(t)
	t.Logf("memory of the test process (node included): before the attacks %v; after %v", before, after)
	if growth := int64(after.heap) - int64(before.heap); growth > 256<<20 {
		t.Errorf("heap grew by %s during the attacks", mib(growth))
	}
}

func expectConnRefused(t *testing.T, addr, tok string) {
	t.Helper()
	for _, v := range []byte{5, 4} {
		want := byte(0x86)
		if v == 4 {
			want = 0x05
		}
		_, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: v, ClientID: "refused-" + newID()[:8], Password: tok, Clean: true, ReadBuffer: 4})
		if err == nil || ack.ReasonCode != want {
			t.Fatalf("v%d CONNECT: CONNACK 0x%02x %v, want 0x%02x", v, ack.ReasonCode, err, want)
		}
	}
}

// heldFor reports how long the server kept a connection that never
// completed its first request.
func heldFor(c net.Conn, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return limit, false // still open
	}
	return time.Since(start), true
}

// TestSlowAttackersAreCutOffWhileOthersAreServed: HTTP slowloris (headers
// trickled a byte at a time), a WebSocket upgraded to /mqtt that never
// sends CONNECT, and TCP MQTT connections that never send CONNECT (200 of
// them, to measure what each costs). HTTP cuts the trickle at its 10 s
// ReadHeaderTimeout; an MQTT connection without CONNECT must be cut within
// 15 s too, or a client can hold server memory forever.
func TestSlowAttackersAreCutOffWhileOthersAreServed(t *testing.T) {
	const idle = 200
	const limit = 15 * time.Second
	srv := startNode(t, pgtest.NewDB(t), nil)
	h := startHealthy(t, srv)
	before := sampleMem(t)

	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]string{}
	held := map[string]bool{}
	record := func(name string, d time.Duration, closed bool) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			results[name] = fmt.Sprintf("closed by the server after %v", d.Round(100*time.Millisecond))
		} else {
			results[name] = fmt.Sprintf("still open after %v", d)
			held[name] = true
		}
	}

	// HTTP slowloris: one header byte every 200 ms, never finishing.
	wg.Go(func() {
		c, err := net.Dial("tcp", srv.HTTPAddr())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		start := time.Now()
		req := "GET /v1/inbox HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000)
		closed := false
		for i := 0; i < len(req) && time.Since(start) < limit; i++ {
			if _, err := c.Write([]byte{req[i]}); err != nil {
				closed = true
				break
			}
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(make([]byte, 512)); err != nil {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					closed = true
					break
				}
			} else {
				closed = true // the server answered (408) and will close
				break
			}
		}
		record("HTTP slowloris (headers trickled byte by byte)", time.Since(start), closed)
	})

	// WebSocket upgraded to /mqtt, then silence.
	wg.Go(func() {
		c, _, err := mqtttest.DialWS("ws://"+srv.HTTPAddr()+"/mqtt", "")
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		d, closed := heldFor(c, limit)
		record("WebSocket upgrade, no CONNECT", d, closed)
	})

	// TCP MQTT without CONNECT: one measured, idle-1 more for the cost.
	var conns []net.Conn
	for i := 0; i < idle; i++ {
		c, err := net.Dial("tcp", srv.MQTTAddr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	wg.Go(func() {
		d, closed := heldFor(conns[0], limit)
		record("TCP MQTT, no CONNECT", d, closed)
	})
	// TCP MQTT: a CONNECT fixed header announcing 60 KiB, then silence.
	wg.Go(func() {
		c, err := net.Dial("tcp", srv.MQTTAddr())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte{0x10, 0x80, 0xe0, 0x03}) // CONNECT, remaining length 61440
		d, closed := heldFor(c, limit)
		record("TCP MQTT, partial CONNECT (60 KiB announced)", d, closed)
	})
	time.Sleep(time.Second)
	during := sampleMem(t)
	wg.Wait()
	h.finish(t)

	for _, n := range slices.Sorted(maps.Keys(results)) {
		t.Logf("%s: %s", n, results[n])
	}
	t.Logf("memory before %v; with %d idle MQTT connections without CONNECT %v: %.0f KiB of heap and %.1f goroutines each",
		before, idle, during, float64(int64(during.heap)-int64(before.heap))/idle/1024, float64(during.goroutines-before.goroutines)/idle)
	if held["HTTP slowloris (headers trickled byte by byte)"] {
		t.Errorf("HTTP slowloris connection still open after %v (ReadHeaderTimeout is 10 s)", limit)
	}
	// Graceful shutdown (budget CHAT_SHUTDOWN_TIMEOUT, 10 s here) while the
	// idle connections are still open.
	closed := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- srv.Close(ctx)
	}()
	select {
	case err := <-closed:
		t.Logf("graceful shutdown with %d idle connections without CONNECT took %v (%v)", idle-1, time.Since(start).Round(10*time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Errorf("BUG: graceful shutdown did not finish within 15 s (budget 10 s) while %d connections without CONNECT are open: mochi's Server.Close waits for every connection's attachClient, which is blocked reading CONNECT", idle-1)
		for _, c := range conns {
			c.Close()
		}
		<-closed
		t.Logf("shutdown finished %v after it began, once the idle connections were closed by their clients", time.Since(start).Round(10*time.Millisecond))
	}
	for _, n := range []string{"TCP MQTT, no CONNECT", "TCP MQTT, partial CONNECT (60 KiB announced)", "WebSocket upgrade, no CONNECT"} {
		if held[n] {
			t.Errorf("BUG: %s: the server kept the connection open for %v and would keep it forever: mochi reads the CONNECT packet without a deadline (server.go attachClient -> readConnectionPacket), so every such socket holds a goroutine pair and buffers until the client goes away", n, limit)
		}
	}
}
