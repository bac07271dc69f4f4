//go:build unix

package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

func TestSIGHUPReloadsTheTLSCertificateAndReportsABrokenOne(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certPath, keyPath, "chatd before")
	env := map[string]string{
		"CHAT_DATABASE_URL": pgtest.NewDB(t), "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "127.0.0.1:0", "CHAT_MQTTS_ADDR": "127.0.0.1:0",
		"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath, "CHAT_SHUTDOWN_TIMEOUT": "10s",
	}
	c := startChatd(t, env)
	logs, done := c.logs, c.done
	addr := waitLog(t, logs, regexp.MustCompile(`listener=mqtts addr=(\S+)`), "mqtts listener line")[1]
	waitLog(t, logs, regexp.MustCompile(`msg="chatd ready"`), "ready line")

	served := func() string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	// No handshake happens between the renewal and the signal: only the
	// SIGHUP can load the new pair.
	writeCert(t, certPath, keyPath, "chatd after")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, regexp.MustCompile(`msg="TLS certificate loaded".*subject="?CN=chatd after`), "reload line after SIGHUP")
	if cn := served(); cn != "chatd after" {
		t.Fatalf("after SIGHUP mqtts serves %q", cn)
	}

	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, regexp.MustCompile(`SIGHUP: TLS certificate, client CAs or client CRL not reloaded; the previous one stays in use`), "error line after a broken SIGHUP")
	if cn := served(); cn != "chatd after" {
		t.Fatalf("after a broken SIGHUP mqtts serves %q", cn)
	}

	c.cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("chatd exited %d:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chatd did not stop")
	}
	if !strings.Contains(logs.String(), "chatd stopped") {
		t.Fatalf("no clean stop:\n%s", logs.String())
	}
}
