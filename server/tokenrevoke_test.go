package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// tokenIssuedAt is an HS256 token for user issued at iat (zero: no iat
// claim), valid for an hour.
func tokenIssuedAt(t *testing.T, user int64, iat time.Time) string {
	t.Helper()
	return signedToken(t, testnode.Secret, user, iat, time.Now().Add(time.Hour))
}

// bearer calls srv's HTTP API with token and returns the status.
func bearer(t *testing.T, srv *server.Server, token, method, path string) httpReply {
	t.Helper()
	return request(t, srv, 0, method, path, nil, map[string]string{"Authorization": "Bearer " + token})
}

// dialWith connects user with token (v 4 or 5), subscribed to its events.
func dialWith(t *testing.T, srv *server.Server, user int64, token, clientID string, v byte) *mqtttest.Client {
	t.Helper()
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: clientID,
		Username: fmt.Sprint(user), Password: token, Clean: true, Keepalive: 60})
	if err != nil {
		t.Fatalf("connect %s: %v (%v)", clientID, err, ack)
	}
	t.Cleanup(c.Drop)
	if codes, err := c.Subscribe(testnode.EventsTopic(user)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe %s: %v %v", clientID, codes, err)
	}
	return c
}

// endedAsRevoked waits for c to be closed by the server: v5 with
// DISCONNECT 0x87.
func endedAsRevoked(t *testing.T, c *mqtttest.Client, v byte, what string) {
	t.Helper()
	endedAsRevokedFor(t, c, v, what, "")
}

// endedAsRevokedFor is endedAsRevoked whose v5 DISCONNECT's reason
// string names naming (the credential withdrawn: "certificate", "CA").
func endedAsRevokedFor(t *testing.T, c *mqtttest.Client, v byte, what, naming string) {
	t.Helper()
	testkit.Receive(t, c.Done, 10*time.Second, fmt.Sprintf("%s is still open 10 s after its credential was withdrawn", what))
	if v == 5 {
		if d, ok := c.ServerDisconnect(); !ok || d.ReasonCode != packets.ErrNotAuthorized.Code || !strings.Contains(d.Properties.ReasonString, naming) {
			t.Fatalf("%s: DISCONNECT 0x%02x %q (sent: %v), want 0x87 not authorized naming %q", what, d.ReasonCode, d.Properties.ReasonString, ok, naming)
		}
	}
}

// "Sign out everywhere": a user whose phone was stolen revokes their
// tokens. Every token issued until then stops working at once, for HTTP,
// for new MQTT connections and for the connections it opened (on any
// node, MQTT 5 and 3.1.1); tokens issued afterwards work, and other users
// are not touched. A JWT is valid until its exp otherwise: before, the
// thief's token kept working for up to its whole lifetime.
func TestRevokingTokensSignsTheUserOutEverywhere(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	a := startNode(t, url, withNodeID(nil, "a"))
	b := startNode(t, url, withNodeID(nil, "b"))
	old := tokenIssuedAt(t, 7, time.Now().Add(-time.Minute))
	noIat := tokenIssuedAt(t, 7, time.Time{})
	onA5 := dialWith(t, a, 7, old, "stolen-a-v5", 5)
	onB4 := dialWith(t, b, 7, old, "stolen-b-v4", 4)
	onBNoIat := dialWith(t, b, 7, noIat, "no-iat-b-v5", 5)
	other := dialWith(t, b, 8, testnode.Token(t, 8), "someone-else", 5)
	if r := bearer(t, a, old, http.MethodGet, "/v1/me"); r.status != http.StatusOK {
		t.Fatalf("GET /v1/me before the revocation: %d %s", r.status, r.body)
	}

	r := bearer(t, a, old, http.MethodPost, "/v1/me/tokens/revoke")
	if r.status != http.StatusOK {
		t.Fatalf("POST /v1/me/tokens/revoke: %d %s", r.status, r.body)
	}
	got := decode[struct {
		RevokedBefore time.Time `json:"revokedBefore"`
	}](t, r)
	if got.RevokedBefore.Before(time.Now().Add(-time.Second)) || got.RevokedBefore.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("revokedBefore %v, want the next whole second", got.RevokedBefore)
	}

	endedAsRevoked(t, onA5, 5, "the connection on the node that revoked")
	endedAsRevoked(t, onB4, 4, "a 3.1.1 connection on another node")
	endedAsRevoked(t, onBNoIat, 5, "a connection whose token has no iat")
	for _, srv := range []*server.Server{a, b} {
		if r := bearer(t, srv, old, http.MethodGet, "/v1/me"); r.status != http.StatusUnauthorized {
			t.Fatalf("GET /v1/me with the revoked token: %d %s, want 401", r.status, r.body)
		}
	}
	for _, v := range []byte{4, 5} {
		if c, ack, err := mqtttest.Dial(b.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("again-v%d", v),
			Username: "7", Password: old, Clean: true}); err == nil {
			c.Drop()
			t.Fatalf("v%d connected with the revoked token: %v", v, ack.ReasonCode)
		}
	}

	// A token issued from the revoked second on works.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(got.RevokedBefore) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	fresh := tokenIssuedAt(t, 7, time.Now())
	if r := bearer(t, b, fresh, http.MethodGet, "/v1/me"); r.status != http.StatusOK {
		t.Fatalf("GET /v1/me with a token issued after the revocation: %d %s", r.status, r.body)
	}
	dialWith(t, a, 7, fresh, "signed-in-again", 5)
	select {
	case <-other.Done:
		t.Fatal("another user's connection was closed")
	default:
	}
	if r := bearer(t, b, testnode.Token(t, 8), http.MethodGet, "/v1/me"); r.status != http.StatusOK {
		t.Fatalf("another user's token: %d %s", r.status, r.body)
	}
}

// stolenToken is a token of user's that srv then revoked, issued a minute
// before; signInAgain waits out the revoked second and answers a token
// the user gets afterwards.
func stolenToken(t *testing.T, srv *server.Server, user int64) (stolen string, signInAgain func() string) {
	t.Helper()
	stolen = tokenIssuedAt(t, user, time.Now().Add(-time.Minute))
	got, err := srv.Service.RevokeTokens(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return stolen, func() string {
		t.Helper()
		testkit.WaitFor(t, 3*time.Second, "the revoked second to pass", func() bool { return !time.Now().Before(got.RevokedBefore) })
		return tokenIssuedAt(t, user, time.Now())
	}
}

// TestARevokedTokenCannotSpendItsUsersRequestBudget: a stolen token its
// user revoked is refused (401) however often it is presented, and never
// takes the user's API rate limit tokens: the user, signed in again, is
// not refused with 429 because the thief kept trying.
func TestARevokedTokenCannotSpendItsUsersRequestBudget(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_API_RATE": "0.1", "CHAT_LIMIT_API_BURST": "5"})
	stolen, signInAgain := stolenToken(t, srv, 7)
	for i := range 12 {
		if r := bearer(t, srv, stolen, http.MethodGet, "/v1/me"); r.status != http.StatusUnauthorized {
			t.Fatalf("request %d with the revoked token: %d %s, want 401", i+1, r.status, r.body)
		}
	}
	if r := bearer(t, srv, signInAgain(), http.MethodGet, "/v1/me"); r.status != http.StatusOK {
		t.Fatalf("the user signed in again: %d %s, want 200", r.status, r.body)
	}
}

// TestARevokedTokenCannotKeepItsUsersDevicesFromConnecting: a stolen
// token its user revoked, used to CONNECT again and again, is refused as
// a bad token (0x86) each time and never takes the user's per-user
// connect budget: the user's own device, signed in again, connects.
func TestARevokedTokenCannotKeepItsUsersDevicesFromConnecting(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONNECT_USER_RATE": "0.1", "CHAT_LIMIT_CONNECT_USER_BURST": "3"})
	stolen, signInAgain := stolenToken(t, srv, 7)
	for i := range 6 {
		c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("thief-%d", i),
			Username: "7", Password: stolen, Clean: true})
		if err == nil {
			c.Drop()
			t.Fatalf("connect %d with the revoked token was accepted", i+1)
		}
		if ack.ReasonCode != packets.ErrBadUsernameOrPassword.Code {
			t.Fatalf("connect %d with the revoked token: CONNACK 0x%02x, want 0x86 bad credentials", i+1, ack.ReasonCode)
		}
	}
	dialWith(t, srv, 7, signInAgain(), "phone-7", 5)
}

// TestALiftedRevocationLetsItsTokensInOnEveryNodeWithinASecond: an
// operator lifts a user's revocation (DELETE FROM token_revocation, as
// docs/operations.md says for a provider whose tokens have no iat). On
// every node, one that refused the user's token since included, the
// token works again within a second, for HTTP and for MQTT. A node that
// had refused it kept refusing it until it restarted (the revocations it
// had seen were remembered for good), and one that had heard the
// revocation announced ended the token's new connections for ten minutes.
func TestALiftedRevocationLetsItsTokensInOnEveryNodeWithinASecond(t *testing.T) {
	url := pgtest.NewDB(t)
	a := startNode(t, url, withNodeID(nil, "a"))
	b := startNode(t, url, withNodeID(nil, "b"))
	old, _ := stolenToken(t, a, 7)
	for _, srv := range []*server.Server{a, b} {
		if r := bearer(t, srv, old, http.MethodGet, "/v1/me"); r.status != http.StatusUnauthorized {
			t.Fatalf("GET /v1/me with the revoked token: %d %s, want 401", r.status, r.body)
		}
		if c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "refused",
			Username: "7", Password: old, Clean: true}); err == nil {
			c.Drop()
			t.Fatalf("connected with the revoked token: %v", ack.ReasonCode)
		}
	}
	if _, err := a.Pool.Exec(context.Background(), `DELETE FROM token_revocation WHERE user_id = 7`); err != nil {
		t.Fatal(err)
	}
	lifted := time.Now()
	for i, srv := range []*server.Server{a, b} {
		testkit.WaitFor(t, 3*time.Second, "the token to work again once its revocation was lifted", func() bool {
			return bearer(t, srv, old, http.MethodGet, "/v1/me").status == http.StatusOK
		})
		if d := time.Since(lifted); d > 1500*time.Millisecond {
			t.Fatalf("node %d: the token worked again %v after the lift, want within a second", i, d)
		}
		c := dialWith(t, srv, 7, old, fmt.Sprintf("lifted-%d", i), 5)
		if _, err := c.Subscribe("chat/v1/user/7/lifted"); err != nil {
			t.Fatalf("node %d: the connection of the token whose revocation was lifted: %v", i, err)
		}
	}
}

// TestTheConnectionThatRevokesItsTokensOverRPCGetsTheAnswerFirst: the
// connection a tokens.revoke request came on ends with the revocation,
// and its DISCONNECT used to overtake the answer (lost in 7 of 20 calls),
// leaving the caller not knowing whether it was signed out. The answer
// goes out first, then the DISCONNECT 0x87, every time.
func TestTheConnectionThatRevokesItsTokensOverRPCGetsTheAnswerFirst(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	for u := int64(1); u <= 20; u++ {
		c := dialWith(t, srv, u, tokenIssuedAt(t, u, time.Now().Add(-time.Minute)), fmt.Sprintf("revoker-%d", u), 5)
		rt := fmt.Sprintf("chat/v1/user/%d/rpc", u)
		if ack, err := c.Publish("chat/v1/rpc/tokens.revoke", 1, []byte(`{}`),
			mqtttest.PublishOpts{ResponseTopic: rt, CorrelationData: []byte("revoke")}); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("user %d: tokens.revoke: 0x%02x %v", u, ack.ReasonCode, err)
		}
		answered := false
		for pk := range c.Publishes { // closed when the connection ends
			if pk.TopicName == rt && string(pk.Properties.CorrelationData) == "revoke" {
				if !strings.Contains(string(pk.Payload), `"revokedBefore"`) {
					t.Fatalf("user %d: answer %s", u, pk.Payload)
				}
				answered = true
			}
		}
		if !answered {
			t.Fatalf("user %d: the connection ended without the answer to tokens.revoke", u)
		}
		endedAsRevoked(t, c, 5, fmt.Sprintf("user %d's connection", u))
	}
}

// A revocation announced while a connection of the user is listed but
// not yet told CONNACK ends it after the CONNACK (0x87): a DISCONNECT
// first would be the first packet the client got [MQTT-3.2.0-1].
func TestARevocationOfAConnectionListedBeforeItsConnackEndsItAfterTheConnack(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	slow := holdConnack(t, srv, "phone")
	pending, listed := slow.dialHeld(t, srv, phoneOptions(t))
	if _, err := srv.Service.RevokeTokens(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	testkit.Never(t, 2*time.Second, "the node closed the connection before writing its CONNACK", listed.Closed)
	close(slow.release)
	c, err := pending.Wait()
	if err != nil {
		t.Fatalf("the phone's connect: %v", err)
	}
	t.Cleanup(c.Drop)
	endedAsRevoked(t, c, 5, "the connection whose token was revoked before its CONNACK")
}
