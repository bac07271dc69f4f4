package server_test

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// caBundle is the PEM bundle of cas, as mqtts_client_ca reads it.
func caBundle(cas ...*testCA) []byte {
	var b bytes.Buffer
	for _, ca := range cas {
		b.Write(ca.pem)
	}
	return b.Bytes()
}

// clientCANode starts a node asking for client certificates of cas, with
// extra settings env, and returns it and the CA bundle's path.
func clientCANode(t *testing.T, serverCA *testCA, env map[string]string, cas ...*testCA) (*server.Server, string) {
	t.Helper()
	caPath := filepath.Join(t.TempDir(), "devices-ca.pem")
	replaceFile(t, caPath, caBundle(cas...))
	all := map[string]string{"CHAT_MQTTS_CLIENT_CA": caPath}
	for k, v := range env {
		all[k] = v
	}
	srv, _, _ := tlsNode(t, serverCA, "chatd", all)
	return srv, caPath
}

// handshakeError is how srv's MQTT TLS listener answers a handshake with
// cert: nil when it accepts it, else the TLS alert. The certificate is
// sent whichever CAs the server names (Go's client would send none of a CA
// not named, as a device configured with its certificate does not). Under
// TLS 1.3 the server's verdict on it arrives after the client's side of
// the handshake is done, so the first read tells; no answer within wait
// is an accepted handshake (the server waits for a CONNECT).
func handshakeError(t *testing.T, srv *server.Server, serverCA *testCA, cert *tls.Certificate, wait time.Duration) error {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", srv.MQTTSAddr(),
		&tls.Config{RootCAs: serverCA.pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }})
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
		return err
	}
	return nil
}

// refusedAtHandshake checks that cert does not get past the TLS handshake.
func refusedAtHandshake(t *testing.T, srv *server.Server, serverCA *testCA, cert *tls.Certificate, what string) {
	t.Helper()
	if err := handshakeError(t, srv, serverCA, cert, 5*time.Second); err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Fatalf("%s: handshake error %v, want a TLS alert", what, err)
	}
}

// stillUp checks that c is open and works.
func stillUp(t *testing.T, c *mqtttest.Client, user int64, what string) {
	t.Helper()
	select {
	case <-c.Done:
		t.Fatalf("%s was disconnected", what)
	default:
	}
	if codes, err := c.Subscribe(testnode.EventsTopic(user)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("%s does not work: %v %v", what, codes, err)
	}
}

// TestADeviceOfANewlyAddedClientCAConnectsWithoutARestart: the client CA
// bundle was read at start only, so rotating device CAs took a restart of
// every node, which drops every connection. A CA added to the bundle file
// is trusted by new handshakes within a second or two, and the devices
// connected meanwhile stay up.
func TestADeviceOfANewlyAddedClientCAConnectsWithoutARestart(t *testing.T) {
	t.Parallel()
	serverCA, oldCA, addedCA := newCA(t, "server CA"), newCA(t, "device CA 2025"), newCA(t, "device CA 2026")
	_, _, oldDev := oldCA.issue(t, "7", false)
	_, _, newDev := addedCA.issue(t, "7", false)
	srv, caPath := clientCANode(t, serverCA, nil, oldCA)
	live := dialDevice(t, srv, serverCA, &oldDev, 7, "sensor-7-old", 5)
	refusedAtHandshake(t, srv, serverCA, &newDev, "a device of a CA not yet in the bundle")

	replaceFile(t, caPath, caBundle(oldCA, addedCA))
	testkit.WaitFor(t, 10*time.Second, "a device of the added CA to get past the handshake", func() bool {
		return handshakeError(t, srv, serverCA, &newDev, time.Second) == nil
	})
	dialDevice(t, srv, serverCA, &newDev, 7, "sensor-7-new", 5)
	dialDevice(t, srv, serverCA, &oldDev, 7, "sensor-7-old-again", 4)
	stillUp(t, live, 7, "the device connected before the change")
}

// TestRemovingAClientCAEndsItsDevicesConnectionsAndRefusesTheirHandshakes:
// removing a CA from the bundle means its devices may no longer connect.
// Their new handshakes fail, and their live connections end within a
// second or two as revoked ones do (v5: DISCONNECT 0x87 with a reason
// naming the CA, 3.1.1: closed; chat_mqtt_token_revoked_total), while the
// devices of the CAs kept stay up.
func TestRemovingAClientCAEndsItsDevicesConnectionsAndRefusesTheirHandshakes(t *testing.T) {
	t.Parallel()
	serverCA, oldCA, keptCA := newCA(t, "server CA"), newCA(t, "device CA 2025"), newCA(t, "device CA 2026")
	_, _, oldDev := oldCA.issue(t, "7", false)
	_, _, newDev := keptCA.issue(t, "7", false)
	srv, caPath := clientCANode(t, serverCA, nil, oldCA, keptCA)
	old5 := dialDevice(t, srv, serverCA, &oldDev, 7, "sensor-7-old-v5", 5)
	old4 := dialDevice(t, srv, serverCA, &oldDev, 7, "sensor-7-old-v4", 4)
	kept := dialDevice(t, srv, serverCA, &newDev, 7, "sensor-7-new", 5)

	replaceFile(t, caPath, caBundle(keptCA))
	endedAsRevokedFor(t, old5, 5, "the v5 connection of the removed CA's device", "CA")
	endedAsRevokedFor(t, old4, 4, "the 3.1.1 connection of the removed CA's device", "CA")
	refusedAtHandshake(t, srv, serverCA, &oldDev, "a device of the removed CA")
	stillUp(t, kept, 7, "the device of the CA kept")
	if n := scrape(t, srv.HTTPAddr())["chat_mqtt_token_revoked_total"]; n != 2 {
		t.Fatalf("chat_mqtt_token_revoked_total = %v, want 2", n)
	}
}

// TestAClientCABundleThatDoesNotLoadKeepsThePreviousCAs: a bundle file
// replaced by one that does not load (half written, no certificate in it,
// a corrupt certificate) leaves the previous CAs in force, for new
// handshakes and live connections alike, sets
// chat_tls_client_ca_reload_failing and is reported by ReloadTLS (SIGHUP);
// a good file clears it.
func TestAClientCABundleThatDoesNotLoadKeepsThePreviousCAs(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA, addedCA := newCA(t, "server CA"), newCA(t, "device CA"), newCA(t, "device CA 2026")
	_, _, dev := deviceCA.issue(t, "7", false)
	_, _, newDev := addedCA.issue(t, "7", false)
	srv, caPath := clientCANode(t, serverCA, nil, deviceCA)
	if got := gauge(t, srv, "chat_tls_client_ca_reload_failing"); got != 0 {
		t.Fatalf("chat_tls_client_ca_reload_failing = %v at start", got)
	}
	live := dialDevice(t, srv, serverCA, &dev, 7, "sensor-7", 5)

	for name, bad := range map[string][]byte{
		"half written":          []byte("-----BEGIN CERTIFICATE-----\nMIIB"),
		"no certificate":        []byte("# the device CAs\n"),
		"a corrupt certificate": []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"),
	} {
		replaceFile(t, caPath, bad)
		testkit.WaitFor(t, 10*time.Second, name+": chat_tls_client_ca_reload_failing", func() bool {
			return gauge(t, srv, "chat_tls_client_ca_reload_failing") == 1
		})
		if err := srv.ReloadTLS(); err == nil {
			t.Fatalf("%s: ReloadTLS accepted it", name)
		}
		dialDevice(t, srv, serverCA, &dev, 7, "sensor-7-again", 5)
		stillUp(t, live, 7, name+": the device connected before")
	}
	replaceFile(t, caPath, caBundle(deviceCA, addedCA))
	testkit.WaitFor(t, 10*time.Second, "chat_tls_client_ca_reload_failing cleared by a good bundle", func() bool {
		return gauge(t, srv, "chat_tls_client_ca_reload_failing") == 0
	})
	dialDevice(t, srv, serverCA, &newDev, 7, "sensor-7-new", 5)
}

// TestACRLSignedByAClientCAAddedInTheSameChangeLoads: the CRL's lists
// must be signed by a client CA, and the CAs were those of the start. A
// CRL naming a CA that is being added loads once the bundle has it,
// whichever file lands first: one looked at before its CA fails (the
// previous lists stay in force) and is tried again until the CA is
// there. The added CA's devices connect, less those its list revokes.
func TestACRLSignedByAClientCAAddedInTheSameChangeLoads(t *testing.T) {
	t.Parallel()
	serverCA, oldCA, addedCA, thirdCA := newCA(t, "server CA"), newCA(t, "device CA 2025"), newCA(t, "device CA 2026"), newCA(t, "device CA 2027")
	_, _, stolen := addedCA.issue(t, "7", false)
	_, _, kept := addedCA.issue(t, "7", false)
	_, _, thirdStolen := thirdCA.issue(t, "8", false)
	next := time.Now().Add(24 * time.Hour)
	dir := t.TempDir()
	crlPath := filepath.Join(dir, "devices-crl.pem")
	replaceFile(t, crlPath, oldCA.crl(t, 1, next))
	srv, caPath := clientCANode(t, serverCA, map[string]string{"CHAT_MQTTS_CLIENT_CRL": crlPath}, oldCA)

	// The CRL first: it cannot load before its CA does.
	replaceFile(t, crlPath, append(oldCA.crl(t, 2, next), addedCA.crl(t, 1, next, stolen)...))
	testkit.WaitFor(t, 10*time.Second, "the CRL of a CA not yet in the bundle to be refused", func() bool {
		return gauge(t, srv, "chat_tls_client_crl_reload_failing") == 1
	})
	replaceFile(t, caPath, caBundle(oldCA, addedCA))
	testkit.WaitFor(t, 10*time.Second, "the CRL to load once its CA is in the bundle", func() bool {
		return gauge(t, srv, "chat_tls_client_crl_reload_failing") == 0
	})
	dialDevice(t, srv, serverCA, &kept, 7, "sensor-7-kept", 5)
	connectRefusedAsRevoked(t, srv, serverCA, &stolen, "the added CA's revoked device")

	// Both at once: the bundle, then the CRL right after.
	replaceFile(t, caPath, caBundle(oldCA, addedCA, thirdCA))
	replaceFile(t, crlPath, bytes.Join([][]byte{oldCA.crl(t, 3, next), addedCA.crl(t, 2, next, stolen), thirdCA.crl(t, 1, next, thirdStolen)}, nil))
	testkit.WaitFor(t, 10*time.Second, "the third CA's revoked device to be refused as revoked", func() bool {
		_, ack, err := dialCert(t, srv.MQTTSAddr(), serverCA.pool(), &thirdStolen, mqtttest.Options{Version: 5, ClientID: "sensor-8", Clean: true})
		return err != nil && ack.ReasonCode == packets.ErrBadUsernameOrPassword.Code
	})
	if got := gauge(t, srv, "chat_tls_client_crl_reload_failing"); got != 0 {
		t.Fatalf("chat_tls_client_crl_reload_failing = %v after both files changed", got)
	}
	connectRefusedAsRevoked(t, srv, serverCA, &stolen, "the added CA's revoked device, after the second change")
}
