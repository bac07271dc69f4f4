package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// tokenExpiringIn is an HS256 token for user whose exp is d from now (d may
// be negative: a token that expired within auth.Leeway is still accepted).
func tokenExpiringIn(t *testing.T, user int64, d time.Duration) string {
	t.Helper()
	now := time.Now()
	return signedToken(t, testnode.Secret, user, now.Add(-time.Hour), now.Add(d))
}

// A token authorizes a connection until it expires, not for as long as
// the connection lasts: a stolen or revoked token must not buy a session
// that keepalives hold open for ever. The server ends the connection when
// the token it connected with stops being accepted (exp plus the clock
// skew allowed at CONNECT: the same token would be refused by then), with
// DISCONNECT 0x87 not authorized on MQTT 5 and a plain close on 3.1.1.
func TestAConnectionEndsWhenItsTokenExpires(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	for _, v := range []byte{4, 5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			// Accepted now (within the leeway), refused two seconds from now.
			tok := tokenExpiringIn(t, 7, -auth.Leeway+2*time.Second)
			c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("expiring-v%d", v),
				Username: "7", Password: tok, Clean: true, Keepalive: 60})
			if err != nil {
				t.Fatalf("connect: %v (%v)", err, ack)
			}
			t.Cleanup(c.Drop)
			endsWhenItsCredentialExpires(t, c, v, 7, "token")
			// The same token connects no more.
			if c2, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("expiring-v%d", v),
				Username: "7", Password: tok, Clean: true}); err == nil {
				c2.Drop()
				t.Fatalf("reconnected with the expired token: %v", ack.ReasonCode)
			}
		})
	}
}

// A device certificate authorizes a connection until it expires, as a
// token does: operations.md tells operators to issue short-lived
// certificates because none is checked for revocation, which only works
// if a connection does not outlive its certificate.
func TestAConnectionEndsWhenItsClientCertificateExpires(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	srv, _ := clientCANode(t, serverCA, nil, deviceCA)
	_, _, dev := deviceCA.issueUntil(t, "7", false, time.Now().Add(3*time.Second))
	c, ack, err := dialCert(t, srv.MQTTSAddr(), serverCA.pool(), &dev, mqtttest.Options{Version: 5, ClientID: "device-7", Clean: true, Keepalive: 60})
	if err != nil {
		t.Fatalf("connect: %v (%v)", err, ack)
	}
	endsWhenItsCredentialExpires(t, c, 5, 7, "certificate")
}

// endsWhenItsCredentialExpires subscribes c, a connection of user's on
// MQTT v, to the user's events and waits for chatd to end it once its
// credential (what) expired: within 15 s, with DISCONNECT 0x87 not
// authorized on MQTT 5.
func endsWhenItsCredentialExpires(t *testing.T, c *mqtttest.Client, v byte, user int64, what string) {
	t.Helper()
	if codes, err := c.Subscribe(testnode.EventsTopic(user)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	testkit.Receive(t, c.Done, 15*time.Second, fmt.Sprintf("the connection is still open 15 s after its %s expired", what))
	if v != 5 {
		return
	}
	if d, ok := c.ServerDisconnect(); !ok || d.ReasonCode != packets.ErrNotAuthorized.Code {
		t.Fatalf("DISCONNECT = %v (sent: %v), want 0x87 not authorized", d.ReasonCode, ok)
	}
}
