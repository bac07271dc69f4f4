package server_test

import (
	"context"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/server"
)

// BenchmarkMQTTSendOneByOneTraced is BenchmarkMQTTSendOneByOne with
// tracing on, every send sampled and continuing a client's traceparent,
// spans exported in batches to nowhere: what tracing costs when on.
func BenchmarkMQTTSendOneByOneTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ct := newClientTrace(9)
	benchSends(b, benchNode(b, server.WithTracerProvider(tp)),
		mqtttest.PublishOpts{User: []packets.UserProperty{{Key: "traceparent", Val: ct.traceparent()}}})
}
