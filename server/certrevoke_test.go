package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
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

// deviceCANodes starts n nodes on one database with MQTT over TLS asking
// for client certificates of the returned device CA.
func deviceCANodes(t *testing.T, n int) (nodes []*server.Server, serverCA, deviceCA *testCA) {
	t.Helper()
	serverCA, deviceCA = newCA(t, "server CA"), newCA(t, "device CA")
	caPath := filepath.Join(t.TempDir(), "devices-ca.pem")
	if err := os.WriteFile(caPath, deviceCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	url := pgtest.NewDB(t)
	for i := range n {
		srv, _, _ := tlsNodeOn(t, url, serverCA, "chatd", withNodeID(map[string]string{"CHAT_MQTTS_CLIENT_CA": caPath}, fmt.Sprintf("n%d", i)))
		nodes = append(nodes, srv)
	}
	return nodes, serverCA, deviceCA
}

// dialDevice connects a device of user with its certificate (v 4 or 5),
// subscribed to the user's events.
func dialDevice(t *testing.T, srv *server.Server, serverCA *testCA, cert *tls.Certificate, user int64, clientID string, v byte) *mqtttest.Client {
	t.Helper()
	c, ack, err := dialCert(t, srv.MQTTSAddr(), serverCA.pool(), cert, mqtttest.Options{Version: v, ClientID: clientID, Clean: true, Keepalive: 60})
	if err != nil {
		t.Fatalf("connect %s: %v (%v)", clientID, err, ack)
	}
	if codes, err := c.Subscribe(testnode.EventsTopic(user)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe %s: %v %v", clientID, codes, err)
	}
	return c
}

// certRevokedReason checks that v5 connection c was ended saying its
// certificate was revoked.
func certRevokedReason(t *testing.T, c *mqtttest.Client, what string) {
	t.Helper()
	if d, _ := c.ServerDisconnect(); !strings.Contains(d.Properties.ReasonString, "certificate") {
		t.Fatalf("%s: DISCONNECT reason %q, want one naming the certificate", what, d.Properties.ReasonString)
	}
}

// TestRevokingAUsersTokensCutsOffTheirCertificateDevicesToo: a device
// authenticated by a client certificate (mTLS, CN = user id) was out of
// reach of "sign out everywhere": a stolen or decommissioned device kept
// its connection and reconnected at will until the certificate expired.
// The user's revocation now covers certificates issued (NotBefore) before
// it as it covers tokens: their connections end on every node (v5
// DISCONNECT 0x87, 3.1.1 a close), a CONNECT with one is refused as a bad
// credential, and a device re-provisioned with a certificate issued from
// the revoked second on connects. Other users' devices are not touched.
func TestRevokingAUsersTokensCutsOffTheirCertificateDevicesToo(t *testing.T) {
	t.Parallel()
	nodes, serverCA, deviceCA := deviceCANodes(t, 2)
	a, b := nodes[0], nodes[1]
	_, _, old := deviceCA.issue(t, "7", false)
	_, _, other := deviceCA.issue(t, "8", false)
	onA5 := dialDevice(t, a, serverCA, &old, 7, "sensor-7-a", 5)
	onB4 := dialDevice(t, b, serverCA, &old, 7, "sensor-7-b", 4)
	someoneElse := dialDevice(t, b, serverCA, &other, 8, "sensor-8", 5)

	got, err := a.Service.RevokeTokens(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	endedAsRevoked(t, onA5, 5, "the device on the node that revoked")
	certRevokedReason(t, onA5, "the device on the node that revoked")
	endedAsRevoked(t, onB4, 4, "a 3.1.1 device on another node")
	for _, srv := range []*server.Server{a, b} {
		for v, want := range map[byte]byte{5: packets.ErrBadUsernameOrPassword.Code, 4: 0x05} {
			c, ack, err := dialCert(t, srv.MQTTSAddr(), serverCA.pool(), &old, mqtttest.Options{Version: v,
				ClientID: fmt.Sprintf("again-v%d", v), Clean: true})
			if err == nil {
				c.Drop()
				t.Fatalf("v%d connected with the revoked certificate", v)
			}
			if ack.ReasonCode != want {
				t.Fatalf("v%d with the revoked certificate: CONNACK 0x%02x, want 0x%02x", v, ack.ReasonCode, want)
			}
		}
	}

	// Re-provisioned: a certificate issued from the revoked second on.
	testkit.WaitFor(t, 3*time.Second, "the revoked second to pass", func() bool { return !time.Now().Before(got.RevokedBefore) })
	_, _, fresh := deviceCA.issueValid(t, "7", false, time.Now(), time.Now().Add(time.Hour))
	dialDevice(t, b, serverCA, &fresh, 7, "sensor-7-new", 5)
	select {
	case <-someoneElse.Done:
		t.Fatal("another user's device was disconnected")
	default:
	}
}

// TestACertificateDeviceThatRevokesOverRPCGetsTheAnswerFirst: a device
// authenticated by its certificate that calls tokens.revoke revokes its
// own certificate too; its connection ends after the answer is written,
// never before, as a token's does.
func TestACertificateDeviceThatRevokesOverRPCGetsTheAnswerFirst(t *testing.T) {
	t.Parallel()
	nodes, serverCA, deviceCA := deviceCANodes(t, 1)
	for u := int64(1); u <= 8; u++ {
		_, _, cert := deviceCA.issue(t, fmt.Sprint(u), false)
		c := dialDevice(t, nodes[0], serverCA, &cert, u, fmt.Sprintf("revoker-%d", u), 5)
		rt := fmt.Sprintf("chat/v1/user/%d/rpc", u)
		if ack, err := c.Publish("chat/v1/rpc/tokens.revoke", 1, []byte(`{}`),
			mqtttest.PublishOpts{ResponseTopic: rt, CorrelationData: []byte("revoke")}); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("user %d: tokens.revoke: 0x%02x %v", u, ack.ReasonCode, err)
		}
		answered := false
		done := time.After(10 * time.Second)
	read:
		for {
			select {
			case pk, ok := <-c.Publishes: // closed when the connection ends
				if !ok {
					break read
				}
				if pk.TopicName == rt && string(pk.Properties.CorrelationData) == "revoke" {
					if !strings.Contains(string(pk.Payload), `"revokedBefore"`) {
						t.Fatalf("user %d: answer %s", u, pk.Payload)
					}
					answered = true
				}
			case <-done:
				t.Fatalf("user %d: the device is still connected 10 s after revoking", u)
			}
		}
		if !answered {
			t.Fatalf("user %d: the connection ended without the answer to tokens.revoke", u)
		}
		endedAsRevoked(t, c, 5, fmt.Sprintf("user %d's device", u))
		certRevokedReason(t, c, fmt.Sprintf("user %d's device", u))
	}
}
