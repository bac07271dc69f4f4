package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/tracing"
)

// Health probes are no traffic worth a trace: a prober asking every few
// seconds on every node would fill a sampled collector with spans of
// nothing. /healthz and /readyz (the metrics listener's too) make no
// span; an API route still makes one.
func TestHealthProbesMakeNoSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	verify := func(string) (int64, time.Time, error) { return 0, time.Time{}, errors.New("no") }
	api := httpapi.New(chat.NewService(nil, chat.DefaultLimits()), verify,
		func(context.Context) error { return nil }, slog.New(slog.DiscardHandler), httpapi.WithTracer(tracing.New(tp)))
	for _, path := range []string{"/healthz", "/readyz"} {
		w := httptest.NewRecorder()
		api.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != 200 {
			t.Fatalf("%s: %d", path, w.Code)
		}
		// As the metrics listener mounts them.
		mux := http.NewServeMux()
		mux.Handle(path, api)
		w = httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != 200 {
			t.Fatalf("%s on the metrics listener: %d", path, w.Code)
		}
	}
	if spans := rec.Ended(); len(spans) != 0 {
		t.Fatalf("probes made %d spans, the first %q; want none", len(spans), spans[0].Name())
	}
	w := httptest.NewRecorder()
	api.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/me", nil))
	if spans := rec.Ended(); len(spans) != 1 || spans[0].Name() != "GET /v1/me" {
		t.Fatalf("an API request (%d) made %d spans, want one named GET /v1/me", w.Code, len(spans))
	}
}
