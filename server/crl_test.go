package server_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// crl is a PEM CRL of ca that lists certs, due for replacement at
// nextUpdate.
func (ca *testCA) crl(t *testing.T, number int64, nextUpdate time.Time, certs ...tls.Certificate) []byte {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(number), ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: nextUpdate}
	for _, c := range certs {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: leaf.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

// crlNodeEnv writes deviceCA and crl to files and returns the settings
// of a node asking for client certificates checked against both, and the
// CRL file's path.
func crlNodeEnv(t *testing.T, deviceCA *testCA, crl []byte) (env map[string]string, crlPath string) {
	t.Helper()
	dir := t.TempDir()
	caPath, crlPath := filepath.Join(dir, "devices-ca.pem"), filepath.Join(dir, "devices-crl.pem")
	if err := os.WriteFile(caPath, deviceCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, crlPath, crl)
	return map[string]string{"CHAT_MQTTS_CLIENT_CA": caPath, "CHAT_MQTTS_CLIENT_CRL": crlPath}, crlPath
}

// gauge is the value of an unlabelled gauge of srv's registry.
func gauge(t *testing.T, srv *server.Server, name string) float64 {
	t.Helper()
	return unlabelled(t, srv, name).GetGauge().GetValue()
}

// connectRefusedAsRevoked checks that cert cannot connect, in v5 nor in
// 3.1.1: CONNACK 0x86 and 0x05, as for a certificate its user revoked.
func connectRefusedAsRevoked(t *testing.T, srv *server.Server, serverCA *testCA, cert *tls.Certificate, what string) {
	t.Helper()
	for v, want := range map[byte]byte{5: packets.ErrBadUsernameOrPassword.Code, 4: 0x05} {
		c, ack, err := dialCert(t, srv.MQTTSAddr(), serverCA.pool(), cert, mqtttest.Options{Version: v, ClientID: "revoked-again", Clean: true})
		if err == nil {
			c.Drop()
			t.Fatalf("%s: v%d connected", what, v)
		}
		if ack.ReasonCode != want {
			t.Fatalf("%s: v%d CONNACK 0x%02x (%v), want 0x%02x", what, v, ack.ReasonCode, err, want)
		}
	}
}

// TestACertificateItsCAsCRLListsIsRefusedWhileTheUsersOtherDevicesConnect:
// a device certificate could only be cut off with its user's revocation,
// which signs every other device of the user out too. With
// mqtts_client_crl, a certificate its CA's CRL lists is refused at CONNECT
// (0x86, 3.1.1 0x05, counted as token_revoked), and another device of the
// same user connects.
func TestACertificateItsCAsCRLListsIsRefusedWhileTheUsersOtherDevicesConnect(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	_, _, stolen := deviceCA.issue(t, "7", false)
	_, _, kept := deviceCA.issue(t, "7", false)
	env, _ := crlNodeEnv(t, deviceCA, deviceCA.crl(t, 1, time.Now().Add(24*time.Hour), stolen))
	srv, _, _ := tlsNode(t, serverCA, "chatd", env)

	connectRefusedAsRevoked(t, srv, serverCA, &stolen, "the revoked certificate")
	dialDevice(t, srv, serverCA, &kept, 7, "sensor-7-kept", 5)
	if n := connects(t, srv, "token_revoked"); n != 2 {
		t.Fatalf(`chat_mqtt_connects_total{outcome="token_revoked"} = %v, want 2`, n)
	}
}

// connects is chat_mqtt_connects_total of outcome.
func connects(t *testing.T, srv *server.Server, outcome string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "chat_mqtt_connects_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestANewCRLEndsTheConnectionsOfTheCertificatesItRevokes: a CRL file
// replaced while chatd runs applies without a restart: the connection of
// a certificate it now lists ends within a second or two (v5: DISCONNECT
// 0x87 naming the certificate, 3.1.1: closed), that certificate is refused
// from then on, and the user's other device stays connected.
func TestANewCRLEndsTheConnectionsOfTheCertificatesItRevokes(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	_, _, stolen := deviceCA.issue(t, "7", false)
	_, _, kept := deviceCA.issue(t, "7", false)
	env, crlPath := crlNodeEnv(t, deviceCA, deviceCA.crl(t, 1, time.Now().Add(24*time.Hour)))
	srv, _, _ := tlsNode(t, serverCA, "chatd", env)
	stolen5 := dialDevice(t, srv, serverCA, &stolen, 7, "sensor-7-v5", 5)
	stolen4 := dialDevice(t, srv, serverCA, &stolen, 7, "sensor-7-v4", 4)
	keptConn := dialDevice(t, srv, serverCA, &kept, 7, "sensor-7-kept", 5)

	replaceFile(t, crlPath, deviceCA.crl(t, 2, time.Now().Add(24*time.Hour), stolen))
	endedAsRevokedFor(t, stolen5, 5, "the v5 connection of the revoked certificate", "certificate")
	endedAsRevokedFor(t, stolen4, 4, "the 3.1.1 connection of the revoked certificate", "certificate")
	connectRefusedAsRevoked(t, srv, serverCA, &stolen, "the newly revoked certificate")
	select {
	case <-keptConn.Done:
		t.Fatal("the user's other device was disconnected")
	default:
	}
	if codes, err := keptConn.Subscribe(testnode.EventsTopic(7)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("the other device's connection does not work: %v %v", codes, err)
	}
}

// TestAClientCRLNotSignedByAClientCAIsRefusedAtStart: a CRL that no CA of
// mqtts_client_ca signed (another key under the same name, or another CA)
// would revoke at someone else's word: chatd does not start, with a
// settings error naming the key and the file.
func TestAClientCRLNotSignedByAClientCAIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	_, _, cert := deviceCA.issue(t, "7", false)
	url := pgtest.NewDB(t)
	for name, crl := range map[string][]byte{
		"another key under the CA's name": newCA(t, "device CA").crl(t, 1, time.Now().Add(time.Hour), cert),
		"another CA":                      newCA(t, "other CA").crl(t, 1, time.Now().Add(time.Hour), cert),
		"not a CRL":                       []byte("-----BEGIN X509 CRL-----\nbm90IGEgQ1JM\n-----END X509 CRL-----\n"),
	} {
		env, crlPath := crlNodeEnv(t, deviceCA, crl)
		c, k, _ := serverCA.issue(t, "chatd", true)
		dir := t.TempDir()
		replaceFile(t, filepath.Join(dir, "cert.pem"), c)
		replaceFile(t, filepath.Join(dir, "key.pem"), k)
		env["CHAT_TLS_CERT"], env["CHAT_TLS_KEY"] = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		env["CHAT_MQTTS_ADDR"] = "127.0.0.1:0"
		st, err := config.Load(nil, config.MapEnv(nodeEnv(t, url, env)))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.Start(context.Background(), st, nil)
		if err == nil {
			_ = srv.Close(context.Background())
			t.Fatalf("%s: chatd started with a CRL its client CA did not sign", name)
		}
		var bad *config.Error
		if !errors.As(err, &bad) || bad.Key != "mqtts_client_crl" || !strings.Contains(err.Error(), crlPath) {
			t.Fatalf("%s: start error = %v, want a settings error about mqtts_client_crl naming %s", name, err, crlPath)
		}
	}
}

// TestAClientCRLThatDoesNotLoadOnReloadKeepsThePreviousLists: a CRL file
// replaced by one that does not load or verify (a half-written file, a
// list of another CA) leaves the previous lists in force, sets
// chat_tls_client_crl_reload_failing and reports it on SIGHUP; a good
// file clears it. chat_tls_client_crl_next_update_timestamp_seconds is the
// lists' NextUpdate.
func TestAClientCRLThatDoesNotLoadOnReloadKeepsThePreviousLists(t *testing.T) {
	t.Parallel()
	serverCA, deviceCA := newCA(t, "server CA"), newCA(t, "device CA")
	_, _, stolen := deviceCA.issue(t, "7", false)
	_, _, kept := deviceCA.issue(t, "7", false)
	next := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	env, crlPath := crlNodeEnv(t, deviceCA, deviceCA.crl(t, 1, next, stolen))
	srv, _, _ := tlsNode(t, serverCA, "chatd", env)
	if got := gauge(t, srv, "chat_tls_client_crl_next_update_timestamp_seconds"); got != float64(next.Unix()) {
		t.Fatalf("chat_tls_client_crl_next_update_timestamp_seconds = %v, want %d", got, next.Unix())
	}
	keptConn := dialDevice(t, srv, serverCA, &kept, 7, "sensor-7-kept", 5)

	for name, bad := range map[string][]byte{
		"half written":      []byte("-----BEGIN X509 CRL-----\nMIIB"),
		"another CA's list": newCA(t, "device CA").crl(t, 2, next, kept),
	} {
		replaceFile(t, crlPath, bad)
		testkit.WaitFor(t, 5*time.Second, name+": chat_tls_client_crl_reload_failing", func() bool {
			return gauge(t, srv, "chat_tls_client_crl_reload_failing") == 1
		})
		if err := srv.ReloadTLS(); err == nil {
			t.Fatalf("%s: ReloadTLS accepted it", name)
		}
		connectRefusedAsRevoked(t, srv, serverCA, &stolen, name+": the certificate the previous list revokes")
		dialDevice(t, srv, serverCA, &kept, 7, "sensor-7-again", 5)
		select {
		case <-keptConn.Done:
			t.Fatalf("%s: a device the previous list does not revoke was disconnected", name)
		default:
		}
	}
	later := next.Add(time.Hour)
	replaceFile(t, crlPath, deviceCA.crl(t, 3, later, stolen))
	testkit.WaitFor(t, 5*time.Second, "chat_tls_client_crl_reload_failing cleared by a good list", func() bool {
		return gauge(t, srv, "chat_tls_client_crl_reload_failing") == 0
	})
	if got := gauge(t, srv, "chat_tls_client_crl_next_update_timestamp_seconds"); got != float64(later.Unix()) {
		t.Fatalf("chat_tls_client_crl_next_update_timestamp_seconds = %v, want %d", got, later.Unix())
	}
}
