package server_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqttwire"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// A CONNECT whose password is empty (the password flag set, zero bytes:
// a client whose stored token is empty, `mosquitto_pub -P ""`) presents
// no token, and is refused as a bad one is (docs/protocol.md,
// Connecting): v5 0x86, 3.1.1 0x05, final answers that send the client
// to get a token. It was refused as a protocol error by the MQTT
// library before chatd looked at it: v5 0x82 and, rewritten for 3.1.1,
// 0x03 server unavailable, which tells a device to try again later: it
// retried with its empty token for ever. The same CONNECT with the token
// connects, so the refusals are the empty password's doing.
func TestAConnectWithAnEmptyPasswordIsRefusedAsABadToken(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	connack := func(version byte, password string, flag bool) packets.Packet {
		t.Helper()
		conn, err := net.Dial("tcp", srv.MQTTAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		pk := mqttwire.Connect(version, mqttwire.Login{ClientID: "empty-password", Username: "1", Password: password, Clean: true, Keepalive: 30})
		pk.Connect.PasswordFlag = flag
		ack, _ := mqttwire.Handshake(conn, bufio.NewReader(conn), pk, 10*time.Second)
		if ack.FixedHeader.Type != packets.Connack {
			t.Fatalf("v%d: no CONNACK", version)
		}
		return ack
	}
	for _, c := range []struct {
		version byte
		want    byte
	}{
		{5, packets.ErrBadUsernameOrPassword.Code},
		{4, packets.Err3NotAuthorized.Code},
	} {
		if ack := connack(c.version, "", true); ack.ReasonCode != c.want {
			t.Errorf("v%d CONNECT with an empty password: CONNACK 0x%02x %q, want 0x%02x, as a bad token",
				c.version, ack.ReasonCode, ack.Properties.ReasonString, c.want)
		}
		if ack := connack(c.version, testnode.Token(t, 1), true); ack.ReasonCode != 0 {
			t.Errorf("v%d CONNECT with the token: CONNACK 0x%02x, want 0x00", c.version, ack.ReasonCode)
		}
	}
}

// A device authenticated by its client certificate needs no password; one
// that sends an empty one (its MQTT library sets the flag whatever the
// value) is the certificate's user all the same. It was refused as a
// protocol error (v5 0x82, 3.1.1 0x03) before its certificate was looked
// at.
func TestACertificateDeviceWithAnEmptyPasswordConnectsAsItsUser(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	srv, _ := clientCANode(t, serverCA, nil, deviceCA)
	_, _, dev := deviceCA.issue(t, "7", false)
	for _, version := range []byte{5, 4} {
		conn, err := tls.Dial("tcp", srv.MQTTSAddr(), &tls.Config{RootCAs: serverCA.pool(), Certificates: []tls.Certificate{dev}})
		if err != nil {
			t.Fatal(err)
		}
		pk := mqttwire.Connect(version, mqttwire.Login{ClientID: fmt.Sprint("cert-empty-password-", version), Clean: true, Keepalive: 30})
		pk.Connect.PasswordFlag = true
		ack, err := mqttwire.Handshake(conn, bufio.NewReader(conn), pk, 10*time.Second)
		if err != nil || ack.ReasonCode != 0 {
			t.Errorf("v%d certificate device with an empty password: CONNACK 0x%02x %q %v, want 0x00", version, ack.ReasonCode, ack.Properties.ReasonString, err)
		}
		conn.Close()
	}
}
