package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRegisterMount: mounted with Register on a mux that also serves /mqtt
// and static files, the API answers its own paths (including its JSON
// 404/405 under /v1/) and leaves every other path to the mux.
func TestRegisterMount(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	e.api.Register(mux)
	mux.HandleFunc("/mqtt", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mqtt") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "static") })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(method, path string, auth bool) (int, string, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+e.token(1))
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	cases := []struct {
		method, path string
		auth         bool
		status       int
		contentType  string
		body         string
	}{
		{"GET", "/v1/inbox", true, 200, "application/json", "{\"conversations\":[],\"nextCursor\":\"\"}\n"},
		{"GET", "/healthz", false, 200, "application/json", "{\"status\":\"ok\"}\n"},
		{"GET", "/readyz", false, 200, "application/json", "{\"status\":\"ok\"}\n"},
		{"PUT", "/v1/inbox", true, 405, "application/json", ""},
		{"GET", "/v1/nope", true, 404, "application/json", ""},
		{"GET", "/mqtt", false, 200, "text/plain; charset=utf-8", "mqtt"},
		{"GET", "/", false, 200, "text/plain; charset=utf-8", "static"},
		{"GET", "/app.js", false, 200, "text/plain; charset=utf-8", "static"},
	}
	for _, c := range cases {
		status, ct, body := get(c.method, c.path, c.auth)
		if status != c.status || ct != c.contentType || (c.body != "" && body != c.body) {
			t.Errorf("%s %s: %d %q %q, want %d %q %q", c.method, c.path, status, ct, body, c.status, c.contentType, c.body)
		}
	}
}
