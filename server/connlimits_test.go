package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// dialUser connects user with clientID (v5 persistent unless v is 4) and
// returns the client, or the CONNACK of a refusal.
func dialUser(t *testing.T, addr string, user int64, clientID string, v byte) (*mqtttest.Client, byte, string) {
	t.Helper()
	c, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: v, ClientID: clientID, Password: testnode.Token(t, user), Clean: true, ReadBuffer: 64})
	if err != nil {
		return nil, ack.ReasonCode, ack.Properties.ReasonString
	}
	t.Cleanup(c.Drop)
	return c, 0, ""
}

// One user may hold max_connections_per_user connections (its default,
// 20), counted by client id: the newest beyond it is refused (v5 0x97 with
// a reason, 3.1.1 0x03), a reconnect with a client id the user holds is a
// takeover and always gets in, a closed connection frees its slot, and
// other users are not affected.
func TestThe21stConnectionOfAUserIsRefusedWith0x97WhileReconnectsGetIn(t *testing.T) {
	env := nodeEnv(t, pgtest.NewDB(t), nil)
	delete(env, "CHAT_MAX_CONNECTIONS_PER_USER") // the default
	srv := testnode.Start(t, env, nil)
	addr := srv.MQTTAddr()
	var held []*mqtttest.Client
	for i := 0; i < 20; i++ {
		v := byte(5)
		if i%2 == 1 {
			v = 4
		}
		var c *mqtttest.Client
		var code byte
		if i == 19 { // one over the WebSocket: it counts the same
			conn, _, err := mqtttest.DialWS("ws://"+srv.HTTPAddr()+"/mqtt", "")
			if err != nil {
				t.Fatal(err)
			}
			c, _, err = mqtttest.DialConn(conn, mqtttest.Options{Version: v, ClientID: "device-19", Password: testnode.Token(t, 1), Clean: true, ReadBuffer: 64})
			if err != nil {
				t.Fatalf("connection 20 (WebSocket): %v", err)
			}
			t.Cleanup(c.Drop)
		} else if c, code, _ = dialUser(t, addr, 1, fmt.Sprintf("device-%d", i), v); c == nil {
			t.Fatalf("connection %d of user 1 refused: 0x%02x", i+1, code)
		}
		held = append(held, c)
	}
	if c, code, reason := dialUser(t, addr, 1, "device-20", 5); c != nil || code != 0x97 || !strings.Contains(reason, "20 connections") {
		t.Fatalf("21st connection (v5): CONNACK 0x%02x %q, want 0x97 naming the cap", code, reason)
	}
	if c, code, _ := dialUser(t, addr, 1, "device-21", 4); c != nil || code != 0x03 {
		t.Fatalf("21st connection (3.1.1): CONNACK 0x%02x, want 0x03", code)
	}
	if c, code, _ := dialUser(t, addr, 2, "other-user", 5); c == nil {
		t.Fatalf("another user refused: 0x%02x", code)
	}
	// A device coming back with its client id takes its session over.
	if c, code, _ := dialUser(t, addr, 1, "device-3", 4); c == nil {
		t.Fatalf("reconnect with a held client id refused: 0x%02x", code)
	}
	testkit.WaitFor(t, 5*time.Second, "the taken-over connection to close", held[3].Closed)
	if c, code, _ := dialUser(t, addr, 1, "device-22", 5); c != nil || code != 0x97 {
		t.Fatalf("after the takeover, a new client id: CONNACK 0x%02x, want 0x97 (still 20)", code)
	}
	// A connection that ends frees its slot.
	held[0].Disconnect()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, code, _ := dialUser(t, addr, 1, "device-23", 5)
		if c != nil {
			break
		}
		if code != 0x97 || time.Now().After(deadline) {
			t.Fatalf("after one connection closed: CONNACK 0x%02x, want accepted", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With Redis, the cap counts a user's connections on all nodes together;
// a client id counts once on whichever node it is; when Redis is gone each
// node caps what it holds itself.
func TestConnectionCapHoldsAcrossNodesWithRedis(t *testing.T) {
	redisURL, stopRedis := redistest.Start(t)
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_REDIS_URL": redisURL, "CHAT_MAX_CONNECTIONS_PER_USER": "3"}
	a := startNode(t, url, withNodeID(env, "a"))
	b := startNode(t, url, withNodeID(env, "b"))
	var onA []*mqtttest.Client
	for i := 0; i < 2; i++ {
		c, code, _ := dialUser(t, a.MQTTAddr(), 1, fmt.Sprintf("a-%d", i), 5)
		if c == nil {
			t.Fatalf("connection %d on node A refused: 0x%02x", i+1, code)
		}
		onA = append(onA, c)
	}
	if c, code, _ := dialUser(t, b.MQTTAddr(), 1, "b-0", 4); c == nil {
		t.Fatalf("3rd connection, on node B, refused: 0x%02x", code)
	}
	if c, code, _ := dialUser(t, b.MQTTAddr(), 1, "b-1", 5); c != nil || code != 0x97 {
		t.Fatalf("4th connection, on node B: CONNACK 0x%02x, want 0x97 (2 on A + 1 on B)", code)
	}
	if c, code, _ := dialUser(t, a.MQTTAddr(), 1, "a-2", 5); c != nil || code != 0x97 {
		t.Fatalf("4th connection, on node A: CONNACK 0x%02x, want 0x97", code)
	}
	// A device of A reconnecting through B (a load balancer's choice)
	// is the same device.
	if c, code, _ := dialUser(t, b.MQTTAddr(), 1, "a-1", 5); c == nil {
		t.Fatalf("client id a-1 moving to node B refused: 0x%02x", code)
	}
	onA[1].Drop()
	onA[0].Disconnect()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, code, _ := dialUser(t, b.MQTTAddr(), 1, "b-2", 5)
		if c != nil {
			break
		}
		if code != 0x97 || time.Now().After(deadline) {
			t.Fatalf("after a connection on A closed, a new one on B: CONNACK 0x%02x, want accepted", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Without Redis each node caps alone: A holds nothing of user 1 now.
	stopRedis()
	for i := 0; i < 3; i++ {
		if c, code, _ := dialUser(t, a.MQTTAddr(), 1, fmt.Sprintf("a-local-%d", i), 5); c == nil {
			t.Fatalf("Redis down: connection %d on node A refused: 0x%02x", i+1, code)
		}
	}
	if c, code, _ := dialUser(t, a.MQTTAddr(), 1, "a-local-3", 5); c != nil || code != 0x97 {
		t.Fatalf("Redis down: 4th connection on node A: CONNACK 0x%02x, want 0x97 (node A's own cap)", code)
	}
}

// The node's connect budget: CONNECTs beyond connect_budget_rate wait for
// their turn, up to connect_budget_queue of them; the others get 0x9F
// (v5) / 0x03 (3.1.1) at once, and come back later.
func TestConnectBudgetQueuesWhatItCanAndRefusesTheRestWith0x9F(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_CONNECT_BUDGET_RATE": "20", "CHAT_CONNECT_BUDGET_QUEUE": "10"})
	const n = 60
	var mu sync.Mutex
	codes := map[byte]int{}
	var slowest time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Go(func() {
			v := byte(5)
			if i%2 == 1 {
				v = 4
			}
			c, code, _ := dialUser(t, srv.MQTTAddr(), int64(100+i), fmt.Sprintf("budget-%d", i), v)
			mu.Lock()
			defer mu.Unlock()
			if c != nil {
				slowest = max(slowest, time.Since(start))
			}
			if code == 0x03 && v == 4 {
				code = 0x9F // the same refusal in 3.1.1's words
			}
			codes[code]++
		})
	}
	wg.Wait()
	t.Logf("%d CONNECTs at once against a budget of 20/s with a queue of 10: %d accepted (the last after %v), %d refused with 0x9F/0x03, others %v",
		n, codes[0], slowest.Round(time.Millisecond), codes[0x9F], codes)
	// 2 at once (a tenth of a second's worth) plus 10 queued, plus what
	// the bucket refills while they arrive.
	if codes[0] < 12 || codes[0] > 25 || codes[0x9F] != n-codes[0] {
		t.Errorf("accepted %d, refused %d (%v); want 12-25 accepted and the rest 0x9F", codes[0], codes[0x9F], codes)
	}
	// The budget refills: a client that comes back later gets in.
	testkit.WaitFor(t, 5*time.Second, "a later CONNECT to be accepted", func() bool {
		c, _, _ := dialUser(t, srv.MQTTAddr(), 99, "later", 5)
		return c != nil
	})
}

// A v5 CONNECT refused because the node's connect budget is full is told
// when to come back (CONNACK 0x9F, user property retryAfter in whole
// seconds), and the refused of one burst are told later and later
// seconds, at the budget's pace, so that they do not all come back at
// once; a 3.1.1 one gets 0x03, which has no properties.
func TestAConnectRefusedByAFullBudgetIsToldWhenToComeBackSpreadAtTheBudgetsPace(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_CONNECT_BUDGET_RATE": "1", "CHAT_CONNECT_BUDGET_QUEUE": "0"})
	tokens := make([]string, 8)
	for i := range tokens {
		tokens[i] = testnode.Token(t, int64(10+i))
	}
	if c, code, _ := dialUser(t, srv.MQTTAddr(), 1, "first", 5); c == nil {
		t.Fatalf("the first CONNECT, within the budget's burst, refused: 0x%02x", code)
	}
	var told []int
	for i, tok := range tokens {
		c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("storm-%d", i), Password: tok, Clean: true})
		if err == nil {
			c.Drop() // a token refilled (a slow machine): it does not count
			continue
		}
		if ack.ReasonCode != 0x9F {
			t.Fatalf("CONNECT %d over the budget: 0x%02x %v, want 0x9F", i, ack.ReasonCode, err)
		}
		s, perr := strconv.Atoi(userProp(ack.Properties.User, "retryAfter"))
		if perr != nil || s < 1 || s > 60 {
			t.Fatalf("CONNACK 0x9F of CONNECT %d: user properties %+v, want retryAfter 1-60 (s)", i, ack.Properties.User)
		}
		told = append(told, s)
	}
	// A turn a second: the 1st refused is told 1 s, the 2nd 2 s, and so on
	// (less what has passed since).
	if len(told) < 5 || told[len(told)-1] < 3 || !slices.IsSorted(told) {
		t.Errorf("retryAfter of the refused CONNECTs in order: %v, want at least 5, rising to 3 s or more", told)
	}
	if c, code, _ := dialUser(t, srv.MQTTAddr(), 30, "old", 4); c != nil || code != 0x03 {
		t.Errorf("a 3.1.1 CONNECT over the budget: accepted %v, CONNACK 0x%02x, want 0x03", c != nil, code)
	}
}

// Once a token is verified, a user's connects are limited per user
// (limit_connect_user_rate): 0x9F / 0x03 beyond it; CONNECTs with a bad
// token do not spend the user's budget, and other users have their own.
func TestAUsersConnectsAreLimitedAfterAuthentication(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONNECT_USER_RATE": "0.01", "CHAT_LIMIT_CONNECT_USER_BURST": "3"})
	addr := srv.MQTTAddr()
	for i := 0; i < 5; i++ {
		if _, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("bad-%d", i), Username: "1", Password: "not a token", Clean: true}); err == nil || ack.ReasonCode != 0x86 {
			t.Fatalf("bad token: 0x%02x %v", ack.ReasonCode, err)
		}
	}
	for i := 0; i < 3; i++ {
		c, code, _ := dialUser(t, addr, 1, fmt.Sprintf("churn-%d", i), 5)
		if c == nil {
			t.Fatalf("connect %d of user 1 within its burst refused: 0x%02x", i+1, code)
		}
		c.Disconnect()
	}
	if c, code, _ := dialUser(t, addr, 1, "churn-3", 5); c != nil || code != 0x9F {
		t.Fatalf("4th connect of user 1 (v5): 0x%02x, want 0x9F", code)
	}
	if c, code, _ := dialUser(t, addr, 1, "churn-4", 4); c != nil || code != 0x03 {
		t.Fatalf("5th connect of user 1 (3.1.1): 0x%02x, want 0x03", code)
	}
	if c, code, _ := dialUser(t, addr, 2, "someone-else", 5); c == nil {
		t.Fatalf("user 2 refused: 0x%02x", code)
	}
}
