package server_test

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// TestHSTSIsSentOnHTTPSAnswersOnlyWhenAsked: with hsts_max_age set,
// every answer of https_addr (a page, the API, an error) carries
// Strict-Transport-Security with that max-age and no includeSubDomains;
// the plain http_addr beside it never does (RFC 6797 §7.2), or a browser
// told so would stop reaching it. chatd sent none.
func TestHSTSIsSentOnHTTPSAnswersOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	certPath, keyPath, roots := serverCert(t)
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath,
		"CHAT_HTTPS_ADDR": "127.0.0.1:0", "CHAT_HSTS_MAX_AGE": "24h"})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}, Timeout: 5 * time.Second}
	get := func(url string) http.Header {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.Header
	}
	for _, path := range []string{"/", "/healthz", "/v1/me", "/no-such-page"} {
		if got := get("https://" + srv.HTTPSAddr() + path).Get("Strict-Transport-Security"); got != "max-age=86400" {
			t.Errorf("https %s: Strict-Transport-Security %q, want max-age=86400", path, got)
		}
		if got := get("http://" + srv.HTTPAddr() + path).Values("Strict-Transport-Security"); len(got) > 0 {
			t.Errorf("plain http %s: Strict-Transport-Security %q, want none", path, got)
		}
	}
}
