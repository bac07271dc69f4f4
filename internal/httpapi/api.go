package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tcpacked"
	"github.com/chatd/chatd/internal/tracing"
)

// API serves the HTTP routes and the RPC methods over one chat.Service.
type API struct {
	svc    *chat.Service
	verify func(token string) (user int64, issuedAt time.Time, err error)
	ready  func(ctx context.Context) error
	log    *slog.Logger
	mux    *http.ServeMux
	rpc    map[string]*endpoint
	tracer *tracing.Tracer // nil: tracing off
	// sendTimeout bounds a message send or change (0: none of its own),
	// as an MQTT publish and an RPC call are bounded (send_timeout).
	sendTimeout time.Duration
	// transferIdle ends an upload that delivered less than putPiece, or
	// an answer (a download, a page) whose client took less than
	// sendPiece, in so long (transferIdle, 60 s).
	transferIdle time.Duration

	draining atomic.Bool // set by Drain: /readyz answers 503
	notReady atomic.Bool // the last readiness ping failed (readyz logs the changes)
}

// Drain makes /readyz answer 503 from now on: the node is shutting down
// and should get no new traffic. /healthz and the other routes are
// unchanged.
func (a *API) Drain() { a.draining.Store(true) }

// Option configures an API.
type Option func(*API)

// WithTracer traces every request as a server span named by its route
// ("POST /v1/conversations/{id}/messages"), a child of the trace its
// traceparent header names; the span's context reaches the Service, so a
// send's group commit, fan-out and Kafka record join that trace.
func WithTracer(t *tracing.Tracer) Option {
	return func(a *API) { a.tracer = t }
}

// WithSendTimeout bounds each message send and change (edit, recall,
// reaction) by d, database commit included, as chatd's MQTT publishes and
// RPC calls are (send_timeout): one that takes longer answers 503
// unavailable instead of waiting for the store's own limit.
func WithSendTimeout(d time.Duration) Option {
	return func(a *API) { a.sendTimeout = d }
}

// WithTransferIdle replaces transferIdle (60 s), the time in which an
// upload must deliver a putPiece and an answer's client take a sendPiece:
// tests use a shorter one.
func WithTransferIdle(d time.Duration) Option {
	return func(a *API) { a.transferIdle = d }
}

// sendContext is ctx bounded by the send timeout, if there is one.
func (a *API) sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.sendTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, a.sendTimeout)
}

// New builds the API. verify turns a bearer token into a user id and
// when it was issued (its iat, zero when it has none; nil rejects every
// token: fail closed); a token issued before its user revoked their tokens
// is refused too. ready reports whether the database answers (nil means
// always ready); logger may be nil.
func New(svc *chat.Service, verify func(token string) (user int64, issuedAt time.Time, err error), ready func(ctx context.Context) error, lg *slog.Logger, opts ...Option) *API {
	a := &API{svc: svc, verify: verify, ready: ready, log: logger(lg), mux: http.NewServeMux(), rpc: map[string]*endpoint{},
		transferIdle: transferIdle}
	for _, o := range opts {
		o(a)
	}
	for i := range endpoints {
		e := &endpoints[i]
		a.mux.Handle(e.Method+" "+e.Path, a.serveEndpoint(e))
		if e.RPC != "" {
			a.rpc[e.RPC] = e
		}
	}
	return a
}

// Handler returns the API as one handler. It answers only under /v1/,
// /healthz and /readyz (everything else is a JSON 404), so chatd mounts it
// beside /mqtt and its static files.
func (a *API) Handler() http.Handler { return a }

// Register mounts the API on mux by prefix rather than route by route, so
// unknown paths and wrong methods under /v1/ still get this API's JSON
// 404/405 instead of the mux's plain text.
func (a *API) Register(mux *http.ServeMux) {
	mux.Handle("/v1/", a)
	mux.Handle("/healthz", a)
	mux.Handle("/readyz", a)
}

// reqInfo carries what the access log needs from inside a handler.
type reqInfo struct {
	user int64
}

type infoKey struct{}

// apiContentSecurityPolicy is the policy of every answer but an
// attachment's bytes: nothing loads, nothing frames it.
const apiContentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'"

// ServeHTTP logs, recovers panics and turns the mux's own 404 and 405
// answers into the API's JSON error form.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{}
	_, route := a.mux.Handler(r)
	sw := &statusWriter{ResponseWriter: w}
	ctx := r.Context()
	// Health probes make no span: a prober asking every few seconds on
	// every node would fill the collector with traces of nothing (/metrics
	// is not the API's and makes none either).
	if a.tracer != nil && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		var span trace.Span
		ctx, span = a.startSpan(ctx, r, route)
		// Deferred first, so it runs last: after a panic's 500.
		defer func() { endSpan(span, sw.status(), info.user) }()
	}
	r = r.WithContext(context.WithValue(ctx, infoKey{}, info))
	h := w.Header()
	// Every answer is per user or per instant: no cache may keep it.
	h.Set("Cache-Control", "no-store")
	// No answer is a page: none may be framed (where a page of another
	// site could dress it up for a click) or read as another type than
	// it says. An attachment sets a policy of its own, as strict.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", apiContentSecurityPolicy)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "pattern", r.Pattern,
				"user", info.user, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !sw.wroteHeader {
				writeJSON(sw, http.StatusInternalServerError, ErrorBody{ErrorDetail{Code: string(chat.CodeInternal), Message: "internal error"}})
			}
		}
		pattern := r.Pattern
		if pattern == "" {
			pattern = "unmatched"
		}
		// Deliberately no path, query, body or header: paths hold ids that
		// are not needed to debug routing, and headers hold tokens.
		a.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("method", r.Method), slog.String("pattern", pattern), slog.Int("status", sw.status()),
			slog.Duration("duration", time.Since(start)), slog.Int64("user", info.user))
	}()
	if route == "" {
		a.mux.ServeHTTP(&jsonErrorWriter{ResponseWriter: sw, rewrite: unmatchedError}, r)
		return
	}
	a.mux.ServeHTTP(sw, r)
}

// startSpan starts a request's server span, continuing the trace of its
// traceparent (and tracestate) header. route is the ServeMux pattern that
// serves it ("" for none: then the span is named by the method alone, as
// the HTTP conventions ask, so that paths never become span names).
func (a *API) startSpan(ctx context.Context, r *http.Request, route string) (context.Context, trace.Span) {
	name, path := r.Method, ""
	if route != "" {
		name = route
		if _, p, ok := strings.Cut(route, " "); ok {
			path = p
		}
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method)}
	if path != "" {
		attrs = append(attrs, attribute.String("http.route", path))
	}
	return a.tracer.Start(tracing.ExtractFrom(ctx, propagation.HeaderCarrier(r.Header)), name,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endSpan records the answer on a request's span: a 5xx is an error of
// the server, anything else an answer.
func endSpan(span trace.Span, status int, user int64) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if user != 0 {
			span.SetAttributes(tracing.AttrUser.Int64(user))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// serveEndpoint is the HTTP side of one endpoint: authenticate, bind, run,
// answer.
func (a *API) serveEndpoint(e *endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = &sendBody{ResponseWriter: w, rc: http.NewResponseController(w), idle: a.transferIdle, conn: connOf(r.Context())}
		var user int64
		if !e.public {
			u, issued, err := a.authenticate(r)
			if err != nil {
				a.writeError(w, r, e.name(), 0, err)
				return
			}
			user = u
			if info, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
				info.user = u
			}
			// A token already found revoked is refused before it spends
			// its user's budget.
			if err := a.svc.TokenKnownRevoked(r.Context(), u, issued); err != nil {
				a.writeError(w, r, e.name(), u, err)
				return
			}
			if err := a.svc.CheckRate(r.Context(), chat.RateAPI, chat.UserKey(u)); err != nil {
				a.writeError(w, r, e.name(), u, err)
				return
			}
			// After the rate limit: each check reads the database.
			if err := a.svc.CheckToken(r.Context(), u, issued); err != nil {
				a.writeError(w, r, e.name(), u, err)
				return
			}
			r = r.WithContext(chat.WithTokenIssuedAt(r.Context(), issued))
		}
		// Health probes answer whatever query a prober adds: refusing one
		// would take a healthy node out of service.
		if !e.public {
			if err := checkQuery(r, e.query); err != nil {
				a.writeError(w, r, e.name(), user, err)
				return
			}
		}
		// Empty counts as absent, as on the routes that honour it; on
		// more than one line it is a key given (idempotencyHeaderLines).
		if e.Key == KeyRefused {
			if k, err := idempotencyHeaderLines(r); k != "" || err != nil {
				a.writeError(w, r, e.name(), user, chat.Errorf(chat.CodeInvalid,
					"%s %s takes no %s: a repeat of it may do more than the first, which no key prevents (docs/http.md, Repeating a request); nothing was done",
					e.Method, e.Path, idempotencyKeyHeader))
				return
			}
		}
		status, v, err := e.serve(a, w, r, user)
		if e.raw {
			if err != nil && !headerWritten(w) {
				a.writeError(w, r, e.name(), user, err)
			}
			return
		}
		if err != nil {
			a.writeError(w, r, e.name(), user, err)
			return
		}
		if notModified(w, r, v) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		writeJSON(w, status, v)
	})
}

// authenticate reads "Authorization: Bearer <token>" and verifies it. The
// reason a token failed is logged at debug only: telling the client would
// help someone probing for valid tokens.
func (a *API) authenticate(r *http.Request) (user int64, issuedAt time.Time, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return 0, issuedAt, errUnauthorized("missing bearer token")
	}
	scheme, token, _ := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return 0, issuedAt, errUnauthorized(`the Authorization header must be "Bearer <token>"`)
	}
	if a.verify == nil {
		return 0, issuedAt, errUnauthorized("invalid or expired token")
	}
	uid, issuedAt, err := a.verify(token)
	if chat.ErrorCode(err) == chat.CodeUnavailable {
		return 0, time.Time{}, err // 503: the signing keys could not be checked now
	}
	if err != nil || uid <= 0 {
		a.log.DebugContext(r.Context(), "token rejected", "err", err, "user", uid)
		return 0, time.Time{}, errUnauthorized("invalid or expired token")
	}
	return uid, issuedAt, nil
}

// writeJSON encodes v as the response body with status. 204 has no body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	h.Set("Content-Type", "application/json")
	b, err := chat.EncodeJSON(v)
	if err != nil {
		// Cannot happen for this package's types; never send half a
		// document if it does.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// statusWriter remembers the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// headerWritten reports whether a handler wrote its answer's header.
func headerWritten(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *statusWriter:
			return x.wroteHeader
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

func (w *statusWriter) status() int {
	if !w.wroteHeader {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sendBody writes an answer with a write deadline that each sendPiece
// the client takes puts idle ahead: a client that takes less than a piece
// in idle (it stopped reading, its window full, while its kernel still
// answers keepalives) ends the answer, which would otherwise hold its
// handler, and the answer (a history page of megabytes) or the open file
// of a download, as long as the client kept the connection. A slow client
// that still takes a piece per idle goes on.
//
// A piece written to the socket is taken, and so, where the kernel tells
// (internal/tcpacked: Linux), is a piece the client's TCP acknowledged
// meanwhile: once the send buffer, grown to megabytes on a fast start, is
// full, Linux wakes a blocked writer only when a third of it has drained,
// so one piece's write may wait minutes for a client that takes some KiB
// a second. A write still under way after idle/8 reads what the client
// has acknowledged, then reads it again every idle/4 and puts the
// deadline idle ahead whenever another piece was acknowledged since: a
// client that takes a piece in every 3/4 of idle keeps its answer however
// full the buffer, one that takes nothing is cut at the deadline its last
// piece set. A write that does not block (nearly all: a JSON answer goes
// into net/http's buffer) reads nothing and only moves a timer. net/http
// clears the deadline once it has flushed the answer's last bytes under
// it.
type sendBody struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
	conn net.Conn // the client's connection, whose acknowledged bytes count; nil: unknown

	mu      sync.Mutex
	watch   *time.Timer // looks at what was acknowledged while a write is under way; nil until one is
	writing bool        // a write is under way: the watch may move its deadline
	marked  bool        // mark holds what was acknowledged when the watch last moved the deadline or first looked
	mark    uint64
}

// sendPiece is what a client must take of an answer within the idle time.
const sendPiece = 4 << 10

func (b *sendBody) Write(p []byte) (int, error) {
	if b.conn != nil {
		b.startWatch()
		defer b.stopWatch()
	}
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), sendPiece)]
		_ = b.rc.SetWriteDeadline(time.Now().Add(b.idle))
		m, err := b.ResponseWriter.Write(piece)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(piece):]
	}
	return n, nil
}

// startWatch has the watch look after idle/8 unless stopWatch comes first.
// The answer keeps one timer for all its writes.
func (b *sendBody) startWatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writing, b.marked = true, false
	if b.watch != nil {
		b.watch.Reset(b.idle / 8)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(b.idle/8, func() { b.look(t) })
	b.watch = t
}

// stopWatch ends the watch of a write: once it returns, no deadline is set
// by it.
func (b *sendBody) stopWatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writing = false
	if !b.watch.Stop() {
		// Its look may be waiting for mu: the next write gets a new
		// timer, so that look knows it is stale.
		b.watch = nil
	}
}

// look is the watch t: the first look of a write reads what the client
// acknowledged, each later one (idle/4 apart) puts the deadline idle ahead
// if the client acknowledged another sendPiece since the deadline last
// moved this way or the first look.
func (b *sendBody) look(t *time.Timer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watch != t || !b.writing {
		return
	}
	a, ok := tcpacked.Read(b.conn)
	if !ok {
		return // unknown (not TCP, closed): the deadline stands
	}
	switch {
	case !b.marked:
		b.mark, b.marked = a, true
	case a-b.mark >= sendPiece:
		b.mark = a
		_ = b.rc.SetWriteDeadline(time.Now().Add(b.idle))
	}
	t.Reset(b.idle / 4)
}

// Unwrap lets http.ResponseController reach the connection.
func (b *sendBody) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// jsonErrorWriter replaces the plain-text (or empty) error answers that
// net/http writes itself with the API's JSON error, so every failure has
// the same body: rewrite names the statuses it replaces; the others, and
// every success, pass through.
type jsonErrorWriter struct {
	http.ResponseWriter
	rewrite  func(code int, h http.Header) (ErrorDetail, bool)
	replaced bool
}

func (w *jsonErrorWriter) WriteHeader(code int) {
	d, ok := w.rewrite(code, w.Header())
	if !ok {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	h := w.Header()
	h.Del("Content-Length")
	if h.Get("Cache-Control") == "" {
		// http.ServeContent drops Cache-Control (and ETag) from the
		// errors it writes; an error answers this request alone.
		h.Set("Cache-Control", "no-store")
	}
	writeJSON(w.ResponseWriter, code, ErrorBody{d})
}

func (w *jsonErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// unmatchedError is ServeMux's answer for a path no route matches (404) or
// a method no route allows (405, keeping the mux's Allow header).
func unmatchedError(code int, h http.Header) (ErrorDetail, bool) {
	switch code {
	case http.StatusNotFound:
		return ErrorDetail{Code: string(chat.CodeNotFound), Message: "no such route; see docs/http.md"}, true
	case http.StatusMethodNotAllowed:
		return ErrorDetail{Code: CodeMethodNotAllowed, Message: "method not allowed; allowed: " + h.Get("Allow")}, true
	}
	return ErrorDetail{}, false
}

// conditionalError is http.ServeContent's answer to a Range outside the
// file or malformed (416, keeping its Content-Range: bytes */size) or an If-Match or
// If-Unmodified-Since the file does not meet (412).
func conditionalError(code int, h http.Header) (ErrorDetail, bool) {
	if code == http.StatusRequestedRangeNotSatisfiable || code == http.StatusPreconditionFailed {
		// The answer is an error, not the file to save.
		h.Del("Content-Disposition")
	}
	switch code {
	case http.StatusRequestedRangeNotSatisfiable:
		return ErrorDetail{Code: CodeRangeNotSatisfiable, Message: "the range is malformed or outside the file of " +
			strings.TrimPrefix(h.Get("Content-Range"), "bytes */") + " bytes"}, true
	case http.StatusPreconditionFailed:
		return ErrorDetail{Code: CodePreconditionFailed, Message: "the file does not meet If-Match or If-Unmodified-Since; its ETag is " + h.Get("ETag")}, true
	}
	return ErrorDetail{}, false
}
