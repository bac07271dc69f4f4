package server

import (
	"bufio"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatd/chatd/broker"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/buildinfo"
	"github.com/chatd/chatd/internal/conncap"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/tlsreload"
	"github.com/chatd/chatd/web"
)

// opsState is what a node runs for operators beside chat itself: the
// identity provider's key set, the TLS certificate that reloads, the HTTPS
// and metrics listeners and their metrics.
type opsState struct {
	jwks        *auth.JWKS
	certs       *tlsreload.Reloader
	clientCAs   *tlsreload.ClientCAs // the CAs of device certificates (mqtts_client_ca), nil without
	crl         *tlsreload.CRL       // the client CAs' revocation lists (mqtts_client_crl), nil without
	mqttsTLS    *tls.Config
	httpsTLS    *tls.Config
	httpMetrics *httpMetrics
	// httpCaps caps the connections of http_addr and https_addr that are
	// new or idle, per client address.
	httpCaps *conncap.HTTP
	ping     *shared[error] // PostgreSQL's answer for /readyz and chat_pg_up

	httpsSrv   *http.Server
	httpsLn    net.Listener
	metricsSrv *http.Server
	metricsLn  net.Listener
}

// scrapeDBTimeout bounds what a gauge asks the database at scrape time,
// well within Prometheus's default 10 s scrape timeout: a stuck database
// (or a table lock) must not hold the whole scrape, or every metric,
// chat_pg_up first, disappears when it is needed most.
const scrapeDBTimeout = 2 * time.Second

// scrapeDBReuse is how long an answer of the database that a scrape or a
// probe asked for is served again to those that follow.
const scrapeDBReuse = 500 * time.Millisecond

// shared is a question to the database that scrapes (/metrics) and
// readiness probes (/readyz) ask. Both answer whoever reaches their
// listener, unauthenticated (/metrics unless metrics_token is set), so
// they share it: one query at a time, within scrapeDBTimeout, its answer
// reused for scrapeDBReuse. Each request asking on its own let a burst of
// them hold every connection of the pool (all at once while the database
// was slow), and the sends with it.
type shared[T any] struct {
	read func(context.Context) T
	mu   sync.Mutex
	at   time.Time
	last T
}

func (q *shared[T]) get() T {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.at.IsZero() && time.Since(q.at) < scrapeDBReuse {
		return q.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeDBTimeout)
	defer cancel()
	q.last, q.at = q.read(ctx), time.Now()
	return q.last
}

// dbGauge is a gauge whose value read asks the database, shared.
func dbGauge(opts prometheus.GaugeOpts, read func(context.Context) float64) prometheus.GaugeFunc {
	q := &shared[float64]{read: read}
	return prometheus.NewGaugeFunc(opts, q.get)
}

// reloadFailing is a gauge of 1 while lastError says the files a
// reloader watches changed but do not load (what is in force stays).
func reloadFailing(name, help string, lastError func() error) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		if lastError() != nil {
			return 1
		}
		return 0
	})
}

// registerOpsMetrics adds chat_build_info and chat_pg_up, which reads
// the ping /readyz shares.
func (s *Server) registerOpsMetrics() {
	buildinfo.Register(s.Registry)
	s.ops.ping = &shared[error]{read: func(ctx context.Context) error {
		if s.Pool == nil {
			return errors.New("no database")
		}
		return s.Pool.Ping(ctx)
	}}
	s.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chat_pg_up",
		Help: "1 when PostgreSQL answered a ping within 2 s at scrape time, 0 when not (sends fail while it is 0).",
	}, func() float64 {
		if s.ops.ping.get() != nil {
			return 0
		}
		return 1
	}))
	s.ops.httpMetrics = newHTTPMetrics(s.Registry)
}

// newVerifier builds the token verifier: chatd's HS256 secret, the
// identity provider's public key file and its JWKS.
func (s *Server) newVerifier(st config.Settings, secret []byte, pub crypto.PublicKey) (*auth.Verifier, error) {
	if st.JWKSURL != "" {
		if u, err := url.Parse(st.JWKSURL); err == nil && u.Scheme == "http" && !loopbackHost(u.Hostname()) {
			s.log.Warn("jwks_url is plain http: anyone on the path can replace the keys and forge tokens; use https", "url", auth.Redacted(st.JWKSURL))
		}
		j, err := auth.NewJWKS(auth.JWKSOptions{URL: st.JWKSURL, Refresh: st.JWKSRefresh, Logger: s.log.With("component", "auth")})
		if err != nil {
			return nil, fmt.Errorf("jwks: %w", err)
		}
		s.ops.jwks = j
		s.log.Info("identity provider key set", "url", j.URL(), "keys", j.Len(), "refresh", st.JWKSRefresh,
			"issuer", st.JWTIssuer, "audience", st.JWTAudience, "user_claim", st.JWTUserClaim)
	}
	// Not a settings error as jwks_url without either is: that would stop,
	// at an upgrade, deployments that run so; the key is often the
	// provider's for every application it serves all the same.
	if pub != nil && st.JWTIssuer == "" && len(st.JWTAudience) == 0 {
		s.log.Warn("jwt_public_key is set without jwt_issuer or jwt_audience: every token the key signs is accepted, whatever application it was issued for; "+
			"set jwt_audience (CHAT_JWT_AUDIENCE) to the client id or API identifier the provider puts in aud, or jwt_issuer (CHAT_JWT_ISSUER) to its iss, or both",
			"key", st.JWTPublicKey)
	}
	return auth.New(auth.Options{HSSecret: secret, PublicKey: pub, JWKS: s.ops.jwks,
		Issuer: st.JWTIssuer, Audience: st.JWTAudience, UserClaim: st.JWTUserClaim}), nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// setupTLS loads the certificate for the TLS listeners and builds their
// configurations. Both serve the one certificate, re-read when its files
// change or on ReloadTLS.
func (s *Server) setupTLS(st config.Settings) error {
	if st.TLSCert == "" {
		return nil
	}
	rl, err := tlsreload.New(st.TLSCert, st.TLSKey, s.log.With("component", "tls"))
	if err != nil {
		return fileSettingError(st, "tls_cert", err,
			"give tls_cert a PEM certificate (chain) and tls_key its PEM private key ("+st.TLSKey+", "+st.Source("tls_key")+"), files chatd can read")
	}
	s.ops.certs = rl
	base := &tls.Config{GetCertificate: rl.GetCertificate, MinVersion: tls.VersionTLS12}
	s.ops.httpsTLS = base.Clone()
	s.ops.httpsTLS.NextProtos = []string{"http/1.1"} // WebSocket upgrades need HTTP/1.1
	s.ops.mqttsTLS = base.Clone()
	if st.MQTTSClientCA != "" {
		if err := s.setupClientCAs(st); err != nil {
			return err
		}
	}
	s.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chat_tls_certificate_expiry_timestamp_seconds",
		Help: "When the certificate served on mqtts_addr and https_addr expires (Unix time); checks its files for a renewal.",
	}, func() float64 {
		_, _ = rl.GetCertificate(nil) // picks up a renewal even without handshakes
		return float64(rl.NotAfter().Unix())
	}), reloadFailing("chat_tls_certificate_reload_failing",
		"1 when the certificate files changed but do not load (the previous certificate stays in use).", rl.LastError))
	return nil
}

// setupClientCAs loads the CAs of device certificates, has the MQTT TLS
// listener verify each new handshake against the bundle in force, and
// exports whether a changed file fails to load; watchClientCerts watches
// the file (and the CRL's).
func (s *Server) setupClientCAs(st config.Settings) error {
	cas, err := tlsreload.NewClientCAs(st.MQTTSClientCA, s.log.With("component", "tls"))
	if err != nil {
		return fileSettingError(st, "mqtts_client_ca", err,
			"give a PEM file chatd can read of the CA certificates that sign the devices' certificates, or unset mqtts_client_ca")
	}
	s.ops.clientCAs = cas
	s.ops.mqttsTLS.ClientAuth = tls.VerifyClientCertIfGiven
	if st.MQTTSClientAuth == "require" {
		s.ops.mqttsTLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	s.ops.mqttsTLS = cas.Config(s.ops.mqttsTLS)
	s.Registry.MustRegister(reloadFailing("chat_tls_client_ca_reload_failing",
		"1 when the client CA bundle (mqtts_client_ca) changed but does not load (the previous CAs stay in force).", cas.LastError))
	return s.setupCRL(st, cas)
}

// setupCRL loads the client CAs' revocation lists, each of which one of
// the CAs in force must have signed, and exports when the earliest is due
// to be replaced and whether a changed file fails to load.
// watchClientCerts watches the file.
func (s *Server) setupCRL(st config.Settings, cas *tlsreload.ClientCAs) error {
	if st.MQTTSClientCRL == "" {
		return nil
	}
	crl, err := tlsreload.NewCRL(st.MQTTSClientCRL, cas.Certificates, s.log.With("component", "tls"))
	if err != nil {
		return fileSettingError(st, "mqtts_client_crl", err,
			"give the CRLs that the CAs of mqtts_client_ca ("+st.MQTTSClientCA+") sign, as openssl ca -gencrl writes them")
	}
	s.ops.crl = crl
	s.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chat_tls_client_crl_next_update_timestamp_seconds",
		Help: "When the client CRL in force is due to be replaced (its earliest NextUpdate, Unix time; 0: it names none). Past it, the lists stay in force.",
	}, func() float64 {
		if t := crl.NextUpdate(); !t.IsZero() {
			return float64(t.Unix())
		}
		return 0
	}), reloadFailing("chat_tls_client_crl_reload_failing",
		"1 when the client CRL file changed but does not load or verify (the previous lists stay in force).", crl.LastError))
	return nil
}

// fileSettingError is a file that key names and that does not load at
// start: a bad setting like those config.Load refuses, found once
// PostgreSQL runs. chatd exits 2 for it, so no supervisor restarts it
// for nothing (the file is re-read only by a new start).
func fileSettingError(st config.Settings, key string, err error, fix string) error {
	return &config.Error{Key: key, Source: st.Source(key), Reason: err.Error(), Fix: fix, Err: err}
}

// watchClientCerts looks at the client CA bundle, then at the CRL file,
// once a CheckInterval and, when other CAs or lists came into force (a
// change of a file, or ReloadTLS), has the hook end the connections of
// the certificates they no longer accept. The bundle comes first: a CRL
// signed by a CA added in the same change loads at the same tick, and
// one that was looked at before its CA is retried at the next.
func (s *Server) watchClientCerts(ctx context.Context, hook *hooks.Chat) error {
	seen := s.clientCertLoads()
	return everyTick(ctx, tlsreload.CheckInterval, func() {
		s.ops.clientCAs.Check()
		if s.ops.crl != nil {
			s.ops.crl.Check()
		}
		if n := s.clientCertLoads(); n != seen {
			seen = n
			hook.PeersChanged()
		}
	})
}

// clientCertLoads counts the loads of the client CAs and CRL since the
// start: a change is a new count.
func (s *Server) clientCertLoads() int64 {
	n := s.ops.clientCAs.Reloads()
	if s.ops.crl != nil {
		n += s.ops.crl.Reloads()
	}
	return n
}

// brokerTLS fills the broker's TLS listener settings.
func (s *Server) brokerTLS(st config.Settings, bc *broker.Config) {
	bc.MQTTSAddr = st.MQTTSAddr
	bc.MQTTSTLS = s.ops.mqttsTLS
	bc.SecureWS = st.HTTPSAddr != ""
	if st.ProxyProtocol {
		bc.WrapListener = broker.ProxyProtocol(st.ProxyTrusted)
	}
	bc.ForwardedTrusted = st.ForwardedTrusted
}

// peerUser is hooks.Config.PeerUser when client certificates are asked
// for, nil otherwise: a certificate whose CA was removed since its
// handshake, or that its CA's CRL lists, is refused as a revoked
// credential.
func (s *Server) peerUser() func(net.Conn) (int64, time.Time, time.Time, bool, error) {
	if s.ops.clientCAs == nil {
		return nil
	}
	checks := auth.CertChecks{Trusts: s.ops.clientCAs.Trusts}
	if s.ops.crl != nil {
		checks.Revoked = s.ops.crl.Revoked
	}
	user := auth.CertUserChecked(checks)
	log := s.log.With("component", "tls")
	return func(conn net.Conn) (int64, time.Time, time.Time, bool, error) {
		id, issued, until, presented, err := user(conn)
		if errors.Is(err, auth.ErrCertRevoked) || errors.Is(err, auth.ErrCertCARemoved) {
			log.Info("client certificate refused", "user", id, "remote", conn.RemoteAddr().String(), "err", err)
		}
		return id, issued, until, presented, err
	}
}

// ReloadTLS reads the TLS certificate and key, the client CAs and the
// client CRL again (SIGHUP), the CAs before the CRL that they verify. New
// handshakes get the new certificate and CAs; established connections keep
// theirs, unless the CA their client certificate chains to was removed or
// the new lists revoke it (watchClientCerts ends them).
func (s *Server) ReloadTLS() error {
	if s.ops.certs == nil {
		s.log.Info("SIGHUP: no TLS certificate configured, nothing to reload")
		return nil
	}
	err := s.ops.certs.Reload()
	if s.ops.clientCAs != nil {
		err = errors.Join(err, s.ops.clientCAs.Reload())
	}
	if s.ops.crl != nil {
		err = errors.Join(err, s.ops.crl.Reload())
	}
	return err
}

// startHTTP serves the HTTP API, the web client, MQTT over WebSocket and
// (unless metrics_addr is set) /metrics on http_addr and https_addr, and
// the metrics listener. /metrics asks for metrics_token, when set, on
// whichever listener serves it.
func (s *Server) startHTTP(st config.Settings, api *httpapi.API, secret []byte) error {
	metrics := metricsAuth(promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}), st.MetricsToken)
	publicMetrics := st.MetricsAddr == ""
	newMux := func(ws http.Handler) http.Handler {
		mux := http.NewServeMux()
		api.Register(mux)
		web.Register(mux, web.Options{Dev: st.Dev, Secret: secret, Logger: s.log.With("component", "web"), ConnectSrc: s.objectOrigin})
		mux.Handle("/mqtt", ws)
		if publicMetrics {
			mux.Handle("GET /metrics", metrics)
		}
		return s.ops.httpMetrics.wrap(mux)
	}
	// One count for both listeners: an address's connections to either
	// hold the node's descriptors alike. A connection is counted under its
	// TCP peer, the trusted proxies' not at all (conncap.HTTP says why).
	// The metrics listener is left out: it is for the scraper's network.
	s.ops.httpCaps = conncap.NewHTTP(st.MaxIdleHTTPConnsPerIP, slices.Concat(st.ForwardedTrusted, st.ProxyTrusted),
		s.ops.httpMetrics.connClosed, s.log.With("component", "http"))
	var err error
	if st.HTTPAddr != "" {
		ln, err := net.Listen("tcp", st.HTTPAddr)
		if err != nil {
			return fmt.Errorf("listen http on %s: %w", st.HTTPAddr, err)
		}
		s.httpLn = s.ops.httpCaps.Listener(ln)
		s.httpSrv = s.newHTTPServer(s.ops.httpCaps.Handler(newMux(s.Broker.WebSocket())))
		s.ops.capHTTP(s.httpSrv)
		s.serve("http", s.httpSrv, s.httpLn)
	}
	if st.HTTPSAddr != "" {
		ln, err := net.Listen("tcp", st.HTTPSAddr)
		if err != nil {
			return fmt.Errorf("listen https on %s: %w", st.HTTPSAddr, err)
		}
		// The cap beneath TLS (net/http must be handed the *tls.Conn): it
		// sees the bytes that arrive, handshake records and all.
		s.ops.httpsLn = tls.NewListener(s.ops.httpCaps.Listener(ln), s.ops.httpsTLS)
		s.ops.httpsSrv = s.newHTTPServer(s.ops.httpCaps.Handler(hsts(newMux(s.Broker.SecureWebSocket()), st.HSTSMaxAge)))
		s.ops.capHTTP(s.ops.httpsSrv)
		s.serve("https", s.ops.httpsSrv, s.ops.httpsLn)
	}
	if st.MetricsAddr != "" {
		if s.ops.metricsLn, err = net.Listen("tcp", st.MetricsAddr); err != nil {
			return fmt.Errorf("listen metrics on %s: %w", st.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		mux.Handle("/healthz", api)
		mux.Handle("/readyz", api)
		s.ops.metricsSrv = s.newHTTPServer(mux)
		s.serve("metrics", s.ops.metricsSrv, s.ops.metricsLn)
	}
	if publicMetrics && st.MetricsToken == "" {
		s.warnOpenMetrics(st)
	}
	return nil
}

// metricsAuth has every request to next, /metrics, carry token as
// "Authorization: Bearer <token>" when token is set; any other answers
// 401 with WWW-Authenticate: Bearer and no body, which says nothing of
// the node. The tokens are compared as SHA-256 sums, in constant time:
// neither the time to refuse nor the lengths tell a guesser how close
// it came.
func metricsAuth(next http.Handler, token string) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimLeft(got, " ")))
		// The scheme is case-insensitive (RFC 9110 §11.1).
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// warnOpenMetrics logs once that /metrics answers anyone on http_addr
// or https_addr, when one of them is reachable from elsewhere: bound to
// an address other than loopback, or behind an HTTP proxy
// (forwarded_trusted names one), which forwards /metrics as it does
// every path. A loopback listener with no proxy named is left quiet (a
// developer's node, the tests').
func (s *Server) warnOpenMetrics(st config.Settings) {
	var open []string
	for _, ln := range []net.Listener{s.httpLn, s.ops.httpsLn} {
		if ln == nil {
			continue
		}
		a, ok := ln.Addr().(*net.TCPAddr)
		if !ok || !a.IP.IsLoopback() || len(st.ForwardedTrusted) > 0 {
			open = append(open, ln.Addr().String())
		}
	}
	if len(open) == 0 {
		return
	}
	s.log.Warn("/metrics is served without authentication on a public listener: anyone who reaches it reads the node's metrics (users online, traffic, error rates, version); "+
		"set metrics_addr (CHAT_METRICS_ADDR) to a private address such as 127.0.0.1:9100 to move it off the public listeners, "+
		"or metrics_token (CHAT_METRICS_TOKEN) to a random token, e.g. `openssl rand -hex 32`, that scrapes send as a bearer token",
		"listeners", open)
}

// hsts adds Strict-Transport-Security to every answer of next, the
// HTTPS listener's, when maxAge is set; never to http_addr's (RFC 6797
// §7.2: a browser ignores it over plain HTTP). No includeSubDomains:
// chatd cannot know that every subdomain of its host is served over
// HTTPS; the domain's own site or the proxy in front may say so.
func hsts(next http.Handler, maxAge time.Duration) http.Handler {
	if maxAge <= 0 {
		return next
	}
	v := "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", v)
		next.ServeHTTP(w, r)
	})
}

// requestBodyTimeout is how long a request's body may take to arrive
// after its headers (ReadHeaderTimeout bounds those). Uploads to
// PUT /v1/uploads/{id} set deadlines of their own, per 16 KiB they read.
const requestBodyTimeout = 60 * time.Second

// capHTTP hands srv's connection states to the HTTP connection cap, and
// its connections to its requests' context beside httpapi's.
func (o *opsState) capHTTP(srv *http.Server) {
	inner := srv.ConnContext
	srv.ConnState = o.httpCaps.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return o.httpCaps.ConnContext(inner(ctx, c), c)
	}
}

func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	timeout := s.bodyTimeout
	if timeout <= 0 {
		timeout = requestBodyTimeout
	}
	return &http.Server{
		Handler:           bodyDeadline(h, timeout),
		ConnContext:       httpapi.ConnContext,
		ReadHeaderTimeout: 10 * time.Second, // slowloris
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 * 1024,
	}
}

// answeredBodyGrace is how long the rest of a request's body may take to
// arrive once the request is being answered without it.
const answeredBodyGrace = 2 * time.Second

// bodyDeadline gives a request that has a body requestBodyTimeout to send
// it: a body that never arrives in full would otherwise hold its
// connection and handler forever. A handler that reads the body and then
// runs longer clears the deadline (httpapi does), or net/http's read
// behind it would time out and cancel the request's context.
//
// A request answered before its body was read to its end (refused with
// 401 before the token is looked at, 413 past the limit, a file served to
// a GET that announced a body) leaves the rest to net/http, which reads up
// to 256 KiB of it before it writes the answer. That read gets
// answeredBodyGrace from when the answer starts (or the handler returns):
// a body sent with its request is there by then and the connection is
// kept, while one that does not come is not waited for (the answer goes
// out with Connection: close). With the body's own deadline, a client
// with no account held a connection a minute with headers alone, as many
// as it opened (the HTTP cap does not count a connection whose request is
// running), and with the deadline httpapi clears once it has read up to
// its limit, for ever.
func bodyDeadline(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		// On a copy of the request: net/http decides from its own
		// request's body (w's) whether to read what a handler left
		// (none of a body that waits for 100 Continue, none past 256 KiB
		// unread, none of one closed early) or to close the connection;
		// wrapped, it read up to 256 KiB of any, waiting the grace for a
		// body it would not have waited for, and would keep a
		// connection whose body was closed with bytes still unread.
		body := &bodyEnd{ReadCloser: r.Body}
		r = r.WithContext(r.Context())
		r.Body = body
		aw := &answering{ResponseWriter: w, rc: rc, body: body}
		next.ServeHTTP(aw, r)
		aw.start()
	})
}

// bodyEnd is a request body that tells whether it was read to its end.
type bodyEnd struct {
	io.ReadCloser
	ended atomic.Bool
}

func (b *bodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended.Store(true)
	}
	return n, err
}

// answering is a response that, once it starts (or its handler returns),
// gives the rest of a body not read to its end answeredBodyGrace to
// arrive (bodyDeadline).
type answering struct {
	http.ResponseWriter
	rc      *http.ResponseController
	body    *bodyEnd
	started bool
}

func (a *answering) start() {
	if a.started {
		return
	}
	a.started = true
	if !a.body.ended.Load() {
		_ = a.rc.SetReadDeadline(time.Now().Add(answeredBodyGrace))
	}
}

func (a *answering) WriteHeader(code int) {
	if code >= 200 {
		a.start()
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answering) Write(b []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answering) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Flush and Hijack keep what the writer underneath offers to handlers
// that assert it (a WebSocket upgrade asserts http.Hijacker).
func (a *answering) Flush() { _ = a.rc.Flush() }

func (a *answering) Hijack() (net.Conn, *bufio.ReadWriter, error) { return a.rc.Hijack() }

func (s *Server) serve(name string, srv *http.Server, ln net.Listener) {
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error(name+" server stopped", "err", err)
		}
	}()
}

// HTTPSAddr is the bound HTTPS address ("" without one).
func (s *Server) HTTPSAddr() string {
	if s.ops.httpsLn == nil {
		return ""
	}
	return s.ops.httpsLn.Addr().String()
}

// MQTTSAddr is the bound MQTT over TLS address ("" without one).
func (s *Server) MQTTSAddr() string {
	if s.Broker == nil {
		return ""
	}
	return s.Broker.MQTTSAddr()
}

// MetricsAddr is the bound metrics address ("" without one).
func (s *Server) MetricsAddr() string {
	if s.ops.metricsLn == nil {
		return ""
	}
	return s.ops.metricsLn.Addr().String()
}

// stopAcceptingOps closes the HTTPS listener (with the HTTP one). The
// metrics listener stays until the end, so a shutdown can be watched.
func (s *Server) stopAcceptingOps() {
	if s.ops.httpsSrv != nil {
		s.ops.httpsSrv.SetKeepAlivesEnabled(false)
		_ = s.ops.httpsLn.Close()
	}
}

// shutdownOps stops the HTTPS and metrics servers and the JWKS refreshes;
// it reports the requests cut off when ctx ended before they were done.
func (s *Server) shutdownOps(ctx context.Context) error {
	var errs []error
	for _, l := range []struct {
		name string
		srv  *http.Server
	}{{"https", s.ops.httpsSrv}, {"metrics", s.ops.metricsSrv}} {
		if err := shutdownHTTP(ctx, l.name, l.srv); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ops.jwks != nil {
		s.ops.jwks.Close()
	}
	return errors.Join(errs...)
}

// shutdownHTTP stops srv (nil: nothing to stop), waiting until ctx ends
// for the requests it is serving; it reports them when ctx cut them off.
// The listener may already be closed (Close stops taking requests before
// the clients drain): Shutdown closes it again while Serve has not yet
// returned from Accept, and that second close's net.ErrClosed is no
// failure of the shutdown.
func shutdownHTTP(ctx context.Context, name string, srv *http.Server) error {
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err == nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	_ = srv.Close()
	return fmt.Errorf("%s: requests still running were cut off: %w", name, err)
}

// logListeners writes one line per listener saying what it serves, then
// the ready line: version, the web client's URL and where the HS256
// secret comes from.
func (s *Server) logListeners(st config.Settings) {
	proxy := ""
	if st.ProxyProtocol {
		proxy = "; PROXY protocol from " + strings.Join(config.PrefixStrings(st.ProxyTrusted), ", ")
	}
	web := "HTTP API /v1, web client /, MQTT over WebSocket /mqtt, /healthz, /readyz"
	if len(st.ForwardedTrusted) > 0 {
		web = strings.Replace(web, "/mqtt", "/mqtt (client addresses from the X-Forwarded-For of "+strings.Join(config.PrefixStrings(st.ForwardedTrusted), ", ")+")", 1)
	}
	metrics, metricsOnly := "/metrics", "/metrics, /healthz, /readyz (no authentication)"
	if st.MetricsToken != "" {
		metrics, metricsOnly = "/metrics (bearer token)", "/metrics (bearer token), /healthz, /readyz (no authentication)"
	}
	if st.MetricsAddr == "" {
		web += ", " + metrics
	}
	if a := s.MQTTAddr(); a != "" {
		s.log.Info("listening", "listener", "mqtt", "addr", a, "serves", "MQTT 3.1.1 and 5 over TCP"+proxy)
	}
	if a := s.MQTTSAddr(); a != "" {
		certs := "JWT in the password"
		switch {
		case st.MQTTSClientCA != "" && st.MQTTSClientAuth == "require":
			certs = "client certificate required (CN = user id)"
		case st.MQTTSClientCA != "":
			certs = "client certificate (CN = user id) or JWT"
		}
		s.log.Info("listening", "listener", "mqtts", "addr", a, "serves", "MQTT 3.1.1 and 5 over TLS; "+certs+proxy)
	}
	if a := s.HTTPAddr(); a != "" {
		s.log.Info("listening", "listener", "http", "addr", a, "serves", web)
	}
	if a := s.HTTPSAddr(); a != "" {
		s.log.Info("listening", "listener", "https", "addr", a, "serves", strings.Replace(web, "WebSocket", "secure WebSocket", 1)+" over TLS")
	}
	if a := s.MetricsAddr(); a != "" {
		s.log.Info("listening", "listener", "metrics", "addr", a, "serves", metricsOnly)
	}
	secret := "env or config (" + st.Source("jwt_secret") + ")"
	if st.JWTSecret == "" {
		secret = auth.SecretPath(st.DataDir)
		if abs, err := filepath.Abs(secret); err == nil {
			secret = abs
		}
	}
	attrs := []any{"version", buildinfo.Get().Version, "revision", buildinfo.Get().Revision, "node", st.NodeID}
	if u := s.WebURL(); u != "" {
		attrs = append(attrs, "web", u)
	}
	attrs = append(attrs, "jwt_secret", secret)
	if st.Dev {
		attrs = append(attrs, "dev", true)
	}
	s.log.Info("chatd ready", attrs...)
}

// WebURL is where the web client is served: the HTTPS listener if there
// is one, else the HTTP one ("" with neither). An unspecified host
// (0.0.0.0, ::) is shown as localhost.
func (s *Server) WebURL() string {
	scheme, addr := "https", s.HTTPSAddr()
	if addr == "" {
		scheme, addr = "http", s.HTTPAddr()
	}
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}
