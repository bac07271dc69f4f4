package server_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// metricsToken is the metrics_token of the nodes below.
const metricsToken = "0123456789abcdef-metrics-token"

// answer is one HTTP answer: its status, headers and body.
type answer struct {
	status int
	header http.Header
	body   string
}

// get sends GET url with the Authorization header auth ("" for none).
func get(t *testing.T, c *http.Client, url, auth string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read the body: %v", url, err)
	}
	return answer{resp.StatusCode, resp.Header, string(body)}
}

// checkMetricsNeedTheToken checks that base's /metrics (base is
// scheme://host:port) answers 401 with WWW-Authenticate: Bearer and
// nothing else unless the request carries metrics_token as a bearer
// token, and the metrics with it; /healthz and /readyz answer without.
func checkMetricsNeedTheToken(t *testing.T, c *http.Client, base string) {
	t.Helper()
	for name, auth := range map[string]string{
		"no Authorization":                   "",
		"a wrong token":                      "Bearer " + strings.Repeat("x", len(metricsToken)),
		"the token with a character missing": "Bearer " + metricsToken[:len(metricsToken)-1],
		"the token and more":                 "Bearer " + metricsToken + "x",
		"the token under another scheme":     "Basic " + metricsToken,
		"the token alone":                    metricsToken,
		"Bearer with no token":               "Bearer ",
	} {
		a := get(t, c, base+"/metrics", auth)
		if a.status != http.StatusUnauthorized || a.header.Get("WWW-Authenticate") != "Bearer" || a.body != "" {
			t.Errorf("GET %s/metrics with %s: %d, WWW-Authenticate %q, body %q; want 401, Bearer and no body",
				base, name, a.status, a.header.Get("WWW-Authenticate"), a.body)
		}
	}
	for _, auth := range []string{"Bearer " + metricsToken, "bearer " + metricsToken} {
		a := get(t, c, base+"/metrics", auth)
		if a.status != http.StatusOK || !strings.Contains(a.body, "\nchat_pg_up 1\n") || !strings.Contains(a.body, "chat_build_info{") {
			t.Errorf("GET %s/metrics with %q: %d, want 200 with chat_pg_up 1 and chat_build_info; body:\n%.300s", base, strings.Fields(auth)[0], a.status, a.body)
		}
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if a := get(t, c, base+probe, ""); a.status != http.StatusOK {
			t.Errorf("GET %s%s without a token: %d, want 200 (probes stay open)", base, probe, a.status)
		}
	}
}

// TestWithAMetricsTokenMetricsOnThePublicListenersAnswerOnlyTheBearerOfIt:
// with metrics_token set, http_addr's and https_addr's /metrics answer
// 401 to a request without the token or with another, and the metrics
// to one that carries it; the probes stay open, and the token is never
// logged.
func TestWithAMetricsTokenMetricsOnThePublicListenersAnswerOnlyTheBearerOfIt(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "CA")
	c, k, _ := ca.issue(t, "chatd", true)
	dir := t.TempDir()
	certPath, keyPath := dir+"/fullchain.pem", dir+"/privkey.pem"
	replaceFile(t, certPath, c)
	replaceFile(t, keyPath, k)
	var logs logtest.Buffer
	srv := testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_TLS_CERT": certPath, "CHAT_TLS_KEY": keyPath, "CHAT_HTTPS_ADDR": "127.0.0.1:0",
		"CHAT_METRICS_TOKEN": metricsToken, "CHAT_LOG_LEVEL": "debug",
	}), slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	checkMetricsNeedTheToken(t, http.DefaultClient, "http://"+srv.HTTPAddr())
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}}
	defer https.CloseIdleConnections()
	checkMetricsNeedTheToken(t, https, "https://"+srv.HTTPSAddr())
	if strings.Contains(logs.String(), metricsToken) {
		t.Errorf("the log shows the metrics token:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "/metrics (bearer token)") {
		t.Errorf("the listening lines do not say /metrics needs a bearer token:\n%s", logs.String())
	}
}

// TestWithAMetricsTokenTheMetricsListenerAnswersOnlyTheBearerOfIt: the
// token is asked for on metrics_addr too (a listener bound to a private
// address is still reached by whatever else runs there), its probes stay
// open, and the public listener still serves no /metrics.
func TestWithAMetricsTokenTheMetricsListenerAnswersOnlyTheBearerOfIt(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_METRICS_ADDR": "127.0.0.1:0", "CHAT_METRICS_TOKEN": metricsToken})
	checkMetricsNeedTheToken(t, http.DefaultClient, "http://"+srv.MetricsAddr())
	if a := get(t, http.DefaultClient, "http://"+srv.HTTPAddr()+"/metrics", "Bearer "+metricsToken); a.status != http.StatusNotFound {
		t.Errorf("GET /metrics on http_addr with metrics_addr set: %d, want 404", a.status)
	}
}

// TestOpenMetricsOnAPublicListenerAreWarnedAboutOnceAtStart: /metrics
// served without a token on an http_addr that others reach (bound to an
// address other than loopback, or behind a proxy forwarded_trusted
// names) is logged once at WARN, saying how to fix it; not with a token,
// nor with /metrics on metrics_addr.
func TestOpenMetricsOnAPublicListenerAreWarnedAboutOnceAtStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  map[string]string
		warn bool
	}{
		{"all addresses, no token", map[string]string{"CHAT_HTTP_ADDR": "0.0.0.0:0"}, true},
		{"loopback behind a proxy, no token", map[string]string{"CHAT_FORWARDED_TRUSTED": "10.0.0.0/8"}, true},
		{"all addresses, a token", map[string]string{"CHAT_HTTP_ADDR": "0.0.0.0:0", "CHAT_METRICS_TOKEN": metricsToken}, false},
		{"all addresses, metrics on their own listener", map[string]string{"CHAT_HTTP_ADDR": "0.0.0.0:0", "CHAT_METRICS_ADDR": "127.0.0.1:0"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			counter := &logtest.Counter{}
			var logs logtest.Buffer
			srv := testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), c.env),
				teeHandler{counter, slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})})
			n := counter.Count("/metrics is served without authentication")
			switch {
			case c.warn && n != 1:
				t.Fatalf("warned %d times, want once; log:\n%s", n, logs.String())
			case !c.warn && n != 0:
				t.Fatalf("warned %d times, want none; log:\n%s", n, logs.String())
			}
			if !c.warn {
				return
			}
			l := logs.String()
			for _, want := range []string{"level=WARN", "metrics_addr (CHAT_METRICS_ADDR)", "metrics_token (CHAT_METRICS_TOKEN)", srv.HTTPAddr()} {
				if !strings.Contains(l, want) {
					t.Errorf("the warning lacks %q:\n%s", want, l)
				}
			}
		})
	}
}
