package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is one API on a fresh database, served on a loopback port.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	svc    *chat.Service
	api    *httpapi.API
	srv    *httptest.Server
	secret []byte
	logs   *logtest.Buffer
}

type envConfig struct {
	limits chat.Limits
	ready  func(context.Context) error // nil: ping the test database
	wrap   func(chat.Store) chat.Store // nil: the PostgreSQL store as is
	// verifier checks the bearer tokens (nil: HS256 with the env's secret).
	verifier *auth.Verifier
}

func newEnv(t *testing.T) *env { return newEnvWith(t, envConfig{}) }

func newEnvWith(t *testing.T, cfg envConfig) *env {
	t.Helper()
	pool := pgtest.NewPool(t)
	var st chat.Store = store.New(pool, cfg.limits)
	if cfg.wrap != nil {
		st = cfg.wrap(st)
	}
	svc := chat.NewService(st, cfg.limits)
	secret := []byte("httpapi-test-secret-0123456789abcdef")
	verifier := cfg.verifier
	if verifier == nil {
		verifier = auth.NewVerifier(secret, nil)
	}
	ready := cfg.ready
	if ready == nil {
		ready = pool.Ping
	}
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	api := httpapi.New(svc, verifier.VerifyIssuedAt, ready, logger)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, pool: pool, svc: svc, api: api, srv: srv, secret: secret, logs: logs}
}

// token mints a valid bearer token for user.
func (e *env) token(user int64) string {
	e.t.Helper()
	tok, err := auth.Mint(e.secret, user, time.Hour)
	if err != nil {
		e.t.Fatalf("mint token: %v", err)
	}
	return tok
}

// resp is a response read in full.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the code of an error body, "" for anything else.
func (r resp) errorCode() string {
	var eb httpapi.ErrorBody
	if json.Unmarshal(r.body, &eb) != nil {
		return ""
	}
	return eb.Error.Code
}

func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// request options.
type reqOpt func(*http.Request)

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func noContentType() reqOpt { return func(r *http.Request) { r.Header.Del("Content-Type") } }

// do sends a request as user (0: no Authorization header). body is nil (no
// body), a string or []byte (sent as is), or a value to encode as JSON.
func (e *env) do(user int64, method, path string, body any, opts ...reqOpt) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			e.t.Fatalf("encode body: %v", err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != 0 {
		req.Header.Set("Authorization", "Bearer "+e.token(user))
	}
	for _, o := range opts {
		o(req)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("read body: %v", err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// must is do that fails the test unless the status is want.
func (e *env) must(want int, user int64, method, path string, body any, out any) resp {
	e.t.Helper()
	r := e.do(user, method, path, body)
	if r.status != want {
		e.t.Fatalf("%s %s as %d: status %d, want %d; body %s", method, path, user, r.status, want, r.body)
	}
	if out != nil {
		r.decode(e.t, out)
	}
	return r
}

// rpcReply is an RPC reply split into its status and the rest.
type rpcReply struct {
	status int
	code   string
	raw    []byte
}

func (e *env) rpc(user int64, method, payload string) rpcReply {
	e.t.Helper()
	raw := e.api.RPC(context.Background(), user, method, []byte(payload))
	var head struct {
		Status *int                 `json:"status"`
		Error  *httpapi.ErrorDetail `json:"error"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Status == nil {
		e.t.Fatalf("rpc %s: reply %s is not JSON with a status (%v)", method, raw, err)
	}
	r := rpcReply{status: *head.Status, raw: raw}
	if head.Error != nil {
		r.code = head.Error.Code
	}
	return r
}

// withoutStatus returns the reply as the HTTP body would be: the same JSON
// object minus "status".
func (r rpcReply) withoutStatus(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.raw, &m); err != nil {
		t.Fatalf("decode rpc reply: %v", err)
	}
	delete(m, "status")
	return m
}

// group creates a group as owner with members and returns its id.
func (e *env) group(owner int64, members ...int64) int64 {
	e.t.Helper()
	if members == nil {
		members = []int64{}
	}
	var c chat.Conversation
	e.must(http.StatusCreated, owner, "POST", "/v1/conversations",
		map[string]any{"type": "group", "title": "g", "members": members}, &c)
	return c.ID
}

// promote makes user an admin; there is no API for it.
func (e *env) promote(conv, user int64) {
	e.t.Helper()
	tag, err := e.pool.Exec(context.Background(),
		`UPDATE conversation_member SET role = 'admin' WHERE conversation_id = $1 AND user_id = $2`, conv, user)
	if err != nil || tag.RowsAffected() != 1 {
		e.t.Fatalf("promote %d in %d: %v (%d rows)", user, conv, err, tag.RowsAffected())
	}
}

// sendMsg sends body as user over HTTP and returns the reply.
func (e *env) sendMsg(user, conv int64, clientMsgID, body string) httpapi.SendReply {
	e.t.Helper()
	var rep httpapi.SendReply
	e.must(http.StatusCreated, user, "POST", pathf("/v1/conversations/%d/messages", conv),
		map[string]string{"clientMsgId": clientMsgID, "body": body}, &rep)
	return rep
}

// pathf is fmt.Sprintf, named for what it builds.
func pathf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// newID returns a fresh clientMsgId.
func newID() string { return uuid.NewString() }

func decodeInto(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", truncate(raw), err)
	}
}
