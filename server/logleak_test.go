package server_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/mqttwire"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// mochi logs a packet it could not process at WARN, whole, under the key
// "pk": a malformed PUBLISH put the message body in chatd's log and a
// second CONNECT on a connection put the client's JWT there. Neither the
// body nor the token may reach the log, whatever a client sends.
func TestAMalformedPublishOrASecondConnectPutsNeitherTheBodyNorTheTokenInTheLog(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	srv := testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), nil), slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	conv := mustDirect(t, t.Context(), srv, 1, 2)
	const body = "the-secret-body-7f3a"
	token := testnode.Token(t, 1)

	// A PUBLISH to a topic with a wildcard, which MQTT forbids.
	c := rawClient(t, srv.MQTTAddr(), 1, "leak-wildcard", 5, true)
	_, _ = c.Publish(fmt.Sprintf("chat/v1/conv/%d/+", conv.ID), 1, testnode.SendPayload(newID(), body))
	testkit.Receive(t, c.Done, 10*time.Second, "the connection with the wildcard topic is still open")

	// A second CONNECT on an established connection.
	conn, err := net.Dial("tcp", srv.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := mqtttest.DialConn(conn, mqtttest.Options{Version: 5, ClientID: "leak-connect", Password: token, Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := mqttwire.Encode(mqttwire.Connect(5, mqttwire.Login{ClientID: "leak-connect", Password: token, Clean: true, Keepalive: 30}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, c2.Done, 10*time.Second, "the connection with a second CONNECT is still open")

	// Both refusals are logged; wait for them, then look.
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), "error processing packet") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	if n := strings.Count(out, "error processing packet"); n < 2 {
		t.Fatalf("%d of the 2 refusals logged (the test would prove nothing):\n%s", n, out)
	}
	// As text, or as the decimal bytes %v prints for a []byte.
	bytesOf := func(s string) string { return strings.Trim(fmt.Sprint([]byte(s)), "[]") }
	if strings.Contains(out, body) || strings.Contains(out, bytesOf(body)) {
		t.Errorf("the message body is in the log:\n%s", out)
	}
	if strings.Contains(out, token) || strings.Contains(out, bytesOf(token)) {
		t.Errorf("the client's JWT is in the log:\n%s", out)
	}
}

// The identity provider's key set URL is logged at start ("identity
// provider key set", and a warning for plain http), and a provider whose
// JWKS sits behind basic authentication is configured with the password
// in the URL (https://user:password@idp/certs): it went into the log as
// given. The log shows the URL with its password masked.
func TestTheJWKSURLsPasswordStaysOutOfTheLog(t *testing.T) {
	t.Parallel()
	const password = "jwks-pass-5e1d"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/certs")
	u.User = url.UserPassword("chatd", password)
	u.Host = strings.Replace(u.Host, "127.0.0.1", "localhost.localdomain", 1) // not loopback by name: the plain-http warning too
	logs := &logtest.Buffer{}
	testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), map[string]string{"CHAT_JWKS_URL": u.String(), "CHAT_JWT_AUDIENCE": "chatd"}),
		slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if !strings.Contains(logs.String(), "identity provider key set") {
		t.Fatalf("no line about the key set:\n%s", logs)
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the JWKS URL's password is in the log:\n%s", logs)
	}
}
