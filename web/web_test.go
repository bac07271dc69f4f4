package web

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/auth"
)

var testSecret = []byte("web-test-secret-0123456789abcdef0123")

// newMux mounts the web client next to stand-ins for what chatd mounts
// beside it, so a pattern conflict panics here as it would in server.Start.
func newMux(t *testing.T, dev bool) *http.ServeMux {
	t.Helper()
	mux := http.NewServeMux()
	stub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.Handle("/v1/", stub)
	mux.Handle("/healthz", stub)
	mux.Handle("/readyz", stub)
	Register(mux, Options{Dev: dev, Secret: testSecret, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mux.Handle("/mqtt", stub)
	mux.Handle("GET /metrics", stub)
	return mux
}

func do(mux http.Handler, method, target, ctype, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Host = "127.0.0.1:8080" // as a browser on the machine addresses it
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

func TestServesPageWithSecurityHeaders(t *testing.T) {
	mux := newMux(t, false)
	for _, tc := range []struct{ path, ctype string }{
		{"/", "text/html; charset=utf-8"},
		{"/app.js", "text/javascript; charset=utf-8"},
		{"/app.css", "text/css; charset=utf-8"},
		{"/favicon.svg", "image/svg+xml"},
	} {
		rec := do(mux, http.MethodGet, tc.path, "", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", tc.path, rec.Code)
		}
		h := rec.Header()
		if got := h.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "connect-src 'self';", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: CSP allows inline or eval: %q", tc.path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: nosniff/frame headers missing: %v", tc.path, h)
		}
		if h.Get("ETag") == "" || h.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: want an ETag and no-cache, got %q / %q", tc.path, h.Get("ETag"), h.Get("Cache-Control"))
		}
		// Revalidation is a 304.
		if rec2 := do(mux, http.MethodGet, tc.path, "", "", "If-None-Match", h.Get("ETag")); rec2.Code != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: %d, want 304", tc.path, rec2.Code)
		}
	}
	if rec := do(mux, http.MethodHead, "/", "", ""); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD /: %d with %d body bytes", rec.Code, rec.Body.Len())
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	mux := newMux(t, false)
	for _, p := range []string{"/nope", "/index.htm", "/static/app.js", "/web.go", "/app.js/", "/e2e/chat.spec.mjs"} {
		if rec := do(mux, http.MethodGet, p, "", ""); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
	rec := do(mux, http.MethodPost, "/", "", "")
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d Allow=%q, want 405 GET, HEAD", rec.Code, rec.Header().Get("Allow"))
	}
	// The API's prefixes stay the API's.
	if rec := do(mux, http.MethodGet, "/v1/inbox", "", ""); rec.Code != http.StatusTeapot {
		t.Errorf("GET /v1/inbox reached the web handler: %d", rec.Code)
	}
	if rec := do(mux, http.MethodGet, "/mqtt", "", ""); rec.Code != http.StatusTeapot {
		t.Errorf("GET /mqtt reached the web handler: %d", rec.Code)
	}
}

func TestDevTokenOnlyInDevMode(t *testing.T) {
	off := newMux(t, false)
	if rec := do(off, http.MethodPost, "/dev/token", "application/json", `{"userId":1}`); rec.Code != http.StatusNotFound {
		t.Fatalf("POST /dev/token without dev: %d, want 404", rec.Code)
	}
	if strings.Contains(do(off, http.MethodGet, "/", "", "").Body.String(), `data-dev="true"`) {
		t.Fatal("the page offers the dev sign-in without dev mode")
	}

	on := newMux(t, true)
	if !strings.Contains(do(on, http.MethodGet, "/", "", "").Body.String(), `data-dev="true"`) {
		t.Fatal("the page does not offer the dev sign-in in dev mode")
	}
	rec := do(on, http.MethodPost, "/dev/token", "application/json", `{"userId":42}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /dev/token: %d %s", rec.Code, rec.Body)
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("token response is cacheable: %q", rec.Header().Get("Cache-Control"))
	}
	var body struct{ Token string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	uid, err := auth.NewVerifier(testSecret, nil).Verify(body.Token)
	if err != nil || uid != 42 {
		t.Fatalf("minted token verifies as %d, %v; want 42", uid, err)
	}
	// No Content-Type is accepted, like the API.
	if rec := do(on, http.MethodPost, "/dev/token", "", `{"userId":7}`); rec.Code != http.StatusOK {
		t.Errorf("POST /dev/token without Content-Type: %d", rec.Code)
	}

	for _, bad := range []struct{ ctype, body string }{
		{"application/json", `{"userId":0}`},
		{"application/json", `{"userId":-1}`},
		{"application/json", `{"userId":"1"}`},
		{"application/json", `{"userId":1,"admin":true}`},
		{"application/json", `{"userId":1}{"userId":2}`},
		{"application/json", ``},
		{"application/json", `{"userId":` + strings.Repeat("1", 2000) + `}`},
	} {
		rec := do(on, http.MethodPost, "/dev/token", bad.ctype, bad.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid"`) {
			t.Errorf("POST /dev/token %q: %d %s, want 400 invalid", bad.body, rec.Code, rec.Body)
		}
	}
	if rec := do(on, http.MethodPost, "/dev/token", "text/plain", `{"userId":1}`); rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("POST /dev/token as text/plain: %d, want 415", rec.Code)
	}
	if rec := do(on, http.MethodGet, "/dev/token", "", ""); rec.Code == http.StatusOK {
		t.Errorf("GET /dev/token: 200, want it refused")
	}
}

// TestDevTokenIsRefusedToAPageOfAnotherName: a page at a name its owner
// points at the developer's machine (DNS rebinding) is same-origin with
// the dev chatd there and could mint itself a token for any user; the
// dev sign-in answers requests addressed by IP or as localhost only.
func TestDevTokenIsRefusedToAPageOfAnotherName(t *testing.T) {
	on := newMux(t, true)
	for _, host := range []string{"rebind.example:8080", "rebind.example", "127.0.0.1.nip.io:8080", "localhost.example:8080"} {
		rec := do(on, http.MethodPost, "/dev/token", "application/json", `{"userId":1}`, "Host", host)
		if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), "token\":") {
			t.Errorf("POST /dev/token to %s: %d %s, want 403 and no token", host, rec.Code, rec.Body)
		}
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST", "app.localhost:8080", "[::1]:8080", "192.168.1.20:8080", "10.0.0.5"} {
		if rec := do(on, http.MethodPost, "/dev/token", "application/json", `{"userId":1}`, "Host", host); rec.Code != http.StatusOK {
			t.Errorf("POST /dev/token to %s: %d %s, want 200", host, rec.Code, rec.Body)
		}
	}
}

// The CSP forbids inline script and style; this keeps the page honest
// about it (a violation would only show as a console error).
func TestPageHasNoInlineScriptOrStyle(t *testing.T) {
	page, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	scripts := regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllSubmatch(page, -1)
	if len(scripts) != 1 || !bytes.Contains(scripts[0][1], []byte(`src="/app.js"`)) || len(bytes.TrimSpace(scripts[0][2])) != 0 {
		t.Errorf("want exactly one external script, /app.js; got %q", scripts)
	}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`), // inline handlers
		regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)javascript:`),
	} {
		if m := re.Find(page); m != nil {
			t.Errorf("index.html has inline code or style: %q", m)
		}
	}
}

// No source file of the client may parse HTML or evaluate code: user text
// goes through textContent only (src/views/dom.js).
func TestClientSourcesNeverParseHTML(t *testing.T) {
	n := 0
	err := filepath.WalkDir("src", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		n++
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, bad := range []string{".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser", "eval(", "new Function", "setAttribute('style'", "javascript:"} {
			if bytes.Contains(src, []byte(bad)) {
				t.Errorf("%s uses %s", p, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("found %d client sources under src/, want the whole client", n)
	}
}
