package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/conncap"
	"github.com/chatd/chatd/internal/httpapi"
)

// httpMetrics counts HTTP requests and their latency by route (the
// ServeMux pattern, e.g. "GET /v1/inbox"; "/" for the web client's files;
// "unmatched" for anything else, so paths never become labels) and status
// code. A WebSocket upgrade (/mqtt) is counted with code 101 but not timed:
// it lasts as long as the MQTT session.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// closed counts the connections conncap.HTTP closed, by its reason.
	closed *prometheus.CounterVec
	api    *http.ServeMux // the API's own routes, for requests under /v1/
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_http_requests_total",
			Help: "HTTP requests by route (ServeMux pattern) and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chat_http_request_duration_seconds",
			Help:    "HTTP request latency by route and status code (WebSocket upgrades excluded).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route", "code"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_http_connections_closed_total",
			Help: "HTTP connections closed because their client address held max_idle_http_connections_per_ip connections that were new or idle: too_many_pending (a new one, closed as accepted), idle_over_cap (an idle keep-alive one, closed to make room)."},
			[]string{"reason"}),
		api: http.NewServeMux(),
	}
	for _, r := range []string{conncap.ReasonTooManyPending, conncap.ReasonIdleOverCap} {
		m.closed.WithLabelValues(r)
	}
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, r := range httpapi.Routes() {
		m.api.Handle(r.Method+" "+r.Path, nop)
	}
	reg.MustRegister(m.requests, m.duration, m.closed)
	return m
}

// connClosed counts a connection conncap.HTTP closed for reason.
func (m *httpMetrics) connClosed(reason string) { m.closed.WithLabelValues(reason).Inc() }

func (m *httpMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusRecorder{ResponseWriter: w}
		// An upgraded connection is counted when it upgrades, not when
		// its session ends.
		sw.onHijack = func() { m.requests.WithLabelValues(m.route(r), "101").Inc() }
		defer func() {
			if sw.hijacked {
				return
			}
			route, code := m.route(r), strconv.Itoa(sw.status())
			m.requests.WithLabelValues(route, code).Inc()
			m.duration.WithLabelValues(route, code).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// route is the pattern that served r; ServeMux records it on r itself.
func (m *httpMetrics) route(r *http.Request) string {
	switch r.Pattern {
	case "":
		return "unmatched"
	case "/v1/", "/healthz", "/readyz": // the API's, routed by method inside
		if _, p := m.api.Handler(r); p != "" {
			return p
		}
		return "unmatched"
	}
	return r.Pattern
}

// statusRecorder remembers the status code; it passes Flush and Hijack
// through (the WebSocket upgrader asserts http.Hijacker directly).
type statusRecorder struct {
	http.ResponseWriter
	code     int
	hijacked bool
	onHijack func()
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) status() int {
	switch {
	case s.hijacked:
		return http.StatusSwitchingProtocols
	case s.code == 0:
		return http.StatusOK
	}
	return s.code
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("http: response does not support hijacking")
	}
	c, rw, err := h.Hijack()
	if err == nil {
		s.hijacked = true
		s.onHijack()
	}
	return c, rw, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
