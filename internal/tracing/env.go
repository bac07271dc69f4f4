package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The standard variables chatd itself reads (through FromEnv's getenv).
// The OTLP exporter and the batch span processor read their own from the
// process environment, as the OpenTelemetry SDK does everywhere:
// OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,HEADERS,TIMEOUT,COMPRESSION,
// CERTIFICATE,CLIENT_CERTIFICATE,CLIENT_KEY,INSECURE}, OTEL_BSP_*,
// OTEL_SPAN_*_LIMIT and OTEL_RESOURCE_ATTRIBUTES.
const (
	EnvSDKDisabled      = "OTEL_SDK_DISABLED"
	EnvTracesExporter   = "OTEL_TRACES_EXPORTER"
	EnvEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesSampler    = "OTEL_TRACES_SAMPLER"
	EnvTracesSamplerArg = "OTEL_TRACES_SAMPLER_ARG"
	EnvServiceName      = "OTEL_SERVICE_NAME"
)

// The specification's defaults, but for the exporter's: see ReadEnv.
const (
	defaultServiceName   = "chatd"
	defaultSampler       = "parentbased_always_on"
	protocolHTTPProtobuf = "http/protobuf"
	protocolGRPC         = "grpc"
	defaultHTTPEndpoint  = "http://localhost:4318"
	defaultGRPCEndpoint  = "http://localhost:4317"
)

// EnvError is a tracing variable chatd cannot use: which, what is wrong
// and what to do, as chatd's configuration errors say it.
type EnvError struct {
	Var, Value, Reason, Fix string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("tracing: %s=%q: %s; %s", e.Var, e.Value, e.Reason, e.Fix)
}

// Config is what the environment asked for, for the start-up log line
// (never headers: they hold credentials).
type Config struct {
	On          bool
	Protocol    string // http/protobuf or grpc
	Endpoint    string // as configured (a password masked), or the protocol's default
	Sampler     string // OTEL_TRACES_SAMPLER as applied
	SamplerArg  string
	ServiceName string
}

// ReadEnv decides from the standard variables whether tracing is on and
// how. Tracing is off unless OTEL_TRACES_EXPORTER=otlp, or it is unset and
// an OTLP endpoint variable is set (the SDKs' own default of "otlp" would
// make every chatd without a collector log export failures);
// OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true turn it off
// whatever else is set.
func ReadEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	c := Config{Protocol: protocolHTTPProtobuf, Sampler: defaultSampler, ServiceName: defaultServiceName}
	if v := get(EnvSDKDisabled); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return c, &EnvError{Var: EnvSDKDisabled, Value: v, Reason: "is not a boolean", Fix: "use true or false"}
		}
		if disabled {
			return c, nil
		}
	}
	endpointVar, endpoint := EnvTracesEndpoint, get(EnvTracesEndpoint)
	if endpoint == "" {
		endpointVar, endpoint = EnvEndpoint, get(EnvEndpoint)
	}
	switch v := strings.ToLower(get(EnvTracesExporter)); v {
	case "otlp":
		c.On = true
	case "":
		c.On = endpoint != ""
	case "none":
		return c, nil
	default:
		return c, &EnvError{Var: EnvTracesExporter, Value: v, Reason: "is not an exporter chatd has",
			Fix: "use otlp (to an OpenTelemetry Collector, Jaeger, Tempo ...) or none"}
	}
	if !c.On {
		return c, nil
	}
	// The exporter reads the endpoint itself, and one it cannot parse it
	// only logs (on a bare stderr line) and replaces with its default.
	if endpoint != "" {
		if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, &EnvError{Var: endpointVar, Value: endpoint, Reason: "is not an http:// or https:// URL with a host",
				Fix: "use the collector's URL, e.g. http://otel-collector:4318 (grpc: http://otel-collector:4317; https:// for TLS)"}
		}
	}
	protoVar := EnvTracesProtocol
	proto := get(EnvTracesProtocol)
	if proto == "" {
		protoVar, proto = EnvProtocol, get(EnvProtocol)
	}
	// Config.Endpoint is for the log: a password in the URL is masked.
	shown := endpoint
	if u, err := url.Parse(endpoint); err == nil && endpoint != "" {
		shown = u.Redacted()
	}
	switch proto {
	case "", protocolHTTPProtobuf:
		c.Protocol, c.Endpoint = protocolHTTPProtobuf, firstSet(shown, defaultHTTPEndpoint)
	case protocolGRPC:
		c.Protocol, c.Endpoint = protocolGRPC, firstSet(shown, defaultGRPCEndpoint)
	default:
		return c, &EnvError{Var: protoVar, Value: proto, Reason: "is not an OTLP protocol chatd speaks",
			Fix: "use http/protobuf (port 4318) or grpc (port 4317)"}
	}
	if v := get(EnvTracesSampler); v != "" {
		c.Sampler = strings.ToLower(v)
	}
	c.SamplerArg = get(EnvTracesSamplerArg)
	if _, err := newSampler(c.Sampler, c.SamplerArg); err != nil {
		return c, err
	}
	if v := get(EnvServiceName); v != "" {
		c.ServiceName = v
	}
	return c, nil
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Identity names this process in its spans' resource.
type Identity struct {
	Version  string // service.version
	Instance string // service.instance.id: the node id
}

// FromEnv builds the tracer provider the environment asks for (ReadEnv);
// nil when tracing is off. The caller shuts it down after the node
// stopped, which flushes the spans still queued.
func FromEnv(ctx context.Context, getenv func(string) string, id Identity) (*sdktrace.TracerProvider, Config, error) {
	c, err := ReadEnv(getenv)
	if err != nil || !c.On {
		return nil, c, err
	}
	sampler, err := newSampler(c.Sampler, c.SamplerArg)
	if err != nil {
		return nil, c, err
	}
	var exp sdktrace.SpanExporter
	// The exporters read the endpoint, headers, TLS files, timeout and
	// compression from the environment themselves.
	if c.Protocol == protocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, c, fmt.Errorf("tracing: create the OTLP %s exporter: %w", c.Protocol, err)
	}
	var attrs []attribute.KeyValue
	if id.Version != "" {
		attrs = append(attrs, attribute.String("service.version", id.Version))
	}
	if id.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", id.Instance))
	}
	// OTEL_RESOURCE_ATTRIBUTES comes after chatd's own, so an operator's
	// value wins; OTEL_SERVICE_NAME, read above, wins over both.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(attrs...), resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", c.ServiceName)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, c, fmt.Errorf("tracing: build the resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sampler)), c, nil
}

// newSampler is OTEL_TRACES_SAMPLER as the specification defines it,
// wrapped by LinkedSampler.
func newSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return nil, &EnvError{Var: EnvTracesSamplerArg, Value: arg, Reason: "is not a ratio from 0 to 1",
				Fix: "use the fraction of traces to keep, e.g. 0.1"}
		}
		return sdktrace.TraceIDRatioBased(f), nil
	}
	var s sdktrace.Sampler
	switch name {
	case "always_on":
		s = sdktrace.AlwaysSample()
	case "always_off":
		s = sdktrace.NeverSample()
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		s = r
	case "parentbased_always_on":
		s = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		s = sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		s = sdktrace.ParentBased(r)
	default:
		return nil, &EnvError{Var: EnvTracesSampler, Value: name, Reason: "is not a sampler chatd has",
			Fix: "use always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio"}
	}
	return LinkedSampler(s), nil
}

// LinkedSampler samples a root span that links to a sampled span, and
// leaves every other decision to base. A group-commit batch is such a
// root: it serves many sends and links to each, so it is kept whenever
// one of them is, whatever ratio drops the rest of the batches.
func LinkedSampler(base sdktrace.Sampler) sdktrace.Sampler { return linkedSampler{base} }

type linkedSampler struct{ base sdktrace.Sampler }

func (s linkedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() {
		for _, l := range p.Links {
			if l.SpanContext.IsSampled() {
				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
			}
		}
	}
	return s.base.ShouldSample(p)
}

func (s linkedSampler) Description() string { return "Linked{" + s.base.Description() + "}" }
