package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tracing"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestTracingIsOffUnlessAnOTLPExporterOrEndpointIsConfigured(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
	}{
		{"nothing set", nil, false},
		{"only a service name", map[string]string{"OTEL_SERVICE_NAME": "chat-eu"}, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"exporter none beats an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{"sdk disabled beats otlp", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.ReadEnv(env(tc.env))
			if err != nil || c.On != tc.on {
				t.Fatalf("ReadEnv: on=%v err=%v, want on=%v", c.On, err, tc.on)
			}
			tp, _, err := tracing.FromEnv(t.Context(), env(tc.env), tracing.Identity{})
			if err != nil || (tp != nil) != tc.on {
				t.Fatalf("FromEnv: provider %v err %v, want on=%v", tp, err, tc.on)
			}
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
}

func TestReadEnvTakesProtocolEndpointSamplerAndServiceName(t *testing.T) {
	c, err := tracing.ReadEnv(env(map[string]string{
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SERVICE_NAME": "chat-eu"}))
	if err != nil {
		t.Fatal(err)
	}
	want := tracing.Config{On: true, Protocol: "grpc", Endpoint: "http://localhost:4317", Sampler: "parentbased_traceidratio",
		SamplerArg: "0.25", ServiceName: "chat-eu"}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	c, _ = tracing.ReadEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example:4318"}))
	if c.Protocol != "http/protobuf" || c.Endpoint != "https://otel.example:4318" || c.Sampler != "parentbased_always_on" || c.ServiceName != "chatd" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestBadTracingVariablesAreRefusedNamingTheVariableAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "jaeger_remote"}, `OTEL_TRACES_SAMPLER="jaeger_remote"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, `OTEL_TRACES_SAMPLER_ARG="2"`},
		{map[string]string{"OTEL_SDK_DISABLED": "maybe"}, `OTEL_SDK_DISABLED="maybe"`},
		// The exporter logged an endpoint it could not parse on a bare
		// stderr line and sent to its default instead, while chatd
		// logged "tracing on" with the endpoint as given.
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "::bad"}, `OTEL_EXPORTER_OTLP_ENDPOINT="::bad"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://[::1"}, `OTEL_EXPORTER_OTLP_ENDPOINT="http://[::1"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="collector:4318/v1/traces"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://collector:4317"}, `OTEL_EXPORTER_OTLP_ENDPOINT="ftp://collector:4317"`},
	} {
		_, err := tracing.ReadEnv(env(tc.env))
		var ee *tracing.EnvError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.want) || ee.Fix == "" {
			t.Errorf("%v: %v, want an EnvError about %s", tc.env, err, tc.want)
		}
	}
}

func TestABatchLinkedToASampledSendIsSampledWhateverTheRatio(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(tracing.LinkedSampler(sdktrace.ParentBased(sdktrace.NeverSample()))))
	tr := tracing.New(tp)
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	dropped := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}})
	_, kept := tr.Start(context.Background(), tracing.SpanBatch, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: dropped}, trace.Link{SpanContext: sampled}))
	_, lone := tr.Start(context.Background(), tracing.SpanBatch, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: dropped}))
	if !kept.IsRecording() || lone.IsRecording() {
		t.Fatalf("linked to a sampled span: recording %v (want true); to none: %v (want false)", kept.IsRecording(), lone.IsRecording())
	}
}

func TestTraceContextRoundTripsAndMalformedOnesAreIgnored(t *testing.T) {
	tc := chat.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "vendor=x"}
	ctx := tracing.Extract(context.Background(), tc)
	if got := tracing.Inject(ctx); got != tc {
		t.Fatalf("round trip: %+v, want %+v", got, tc)
	}
	sc := tracing.SpanContext(tc)
	if !sc.IsRemote() || !sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("span context %+v", sc)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if tracing.SpanContext(chat.TraceContext{Parent: bad}).IsValid() {
			t.Errorf("%q parsed as a valid trace context", bad)
		}
	}
	if got := tracing.Inject(context.Background()); got != (chat.TraceContext{}) {
		t.Fatalf("an untraced context injects %+v", got)
	}
}

func TestANilTracerAllocatesNothing(t *testing.T) {
	var tr *tracing.Tracer
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tr.Start(ctx, tracing.SpanSend)
		span.End()
		tracing.Finish(span, nil)
		_ = c
	})
	if allocs != 0 {
		t.Fatalf("a nil Tracer allocates %.1f times per span", allocs)
	}
}

func TestFromEnvExportsSpansOverOTLPHTTPToTheConfiguredEndpoint(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var ctype string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths, ctype = append(paths, r.URL.Path), r.Header.Get("Content-Type")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	// The exporter reads its endpoint from the process environment, as
	// every OpenTelemetry SDK does; chatd's switch reads the same.
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_SERVICE_NAME": "chatd-test"}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	tp, c, err := tracing.FromEnv(t.Context(), env(vars), tracing.Identity{Version: "v1.2.3", Instance: "node-1"})
	if err != nil || tp == nil || c.Endpoint != collector.URL {
		t.Fatalf("FromEnv: %v %+v %v", tp, c, err)
	}
	_, span := tracing.New(tp).Start(context.Background(), tracing.SpanSend)
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "/v1/traces" || ctype != "application/x-protobuf" {
		t.Fatalf("collector got %v (%s), want a protobuf POST to /v1/traces", paths, ctype)
	}
}

// TestTheLoggedEndpointHidesItsPassword: chatd logs "tracing on" with
// Config.Endpoint, which is never to carry credentials (the headers are
// left out for that); a collector URL with a password in it
// (https://user:pass@collector) was logged with the password.
func TestTheLoggedEndpointHidesItsPassword(t *testing.T) {
	c, err := tracing.ReadEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://chatd:hunter2secret@otel.example:4318"}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Endpoint, "hunter2secret") || !strings.Contains(c.Endpoint, "otel.example:4318") {
		t.Errorf("Config.Endpoint = %q, want the collector without the password", c.Endpoint)
	}
}
