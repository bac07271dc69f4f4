// Package tracing is chatd's one place for OpenTelemetry: the tracer the
// adapters start their spans with, the W3C trace-context propagation they
// share, and the tracer provider the standard OTEL_* variables configure.
//
// # Contract
//
//   - Off is a nil *Tracer. Every method of a nil Tracer is a no-op that
//     returns its context unchanged and allocates nothing, so a hot path
//     pays one pointer comparison per message when tracing is off. Call
//     sites that build attributes check the Tracer against nil (or
//     span.IsRecording) first, so those are not built either.
//   - Spans follow a write through context.Context where one goroutine
//     hands work to the next synchronously; where the work crosses a queue
//     or a process (group commit, the fan-out queue, the outbox row, a
//     Kafka record) the trace travels as a chat.TraceContext, the W3C
//     traceparent and tracestate strings (Inject, Extract). Only the W3C
//     tracecontext format is read and written; baggage is not propagated.
//   - FromEnv builds the provider from the standard variables: off unless
//     OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint is set (env.go says
//     which variables count). The batch span processor exports off the
//     senders' path; Shutdown of the provider flushes it.
//   - The span names and attributes below are what operators query by;
//     docs/operations.md (Tracing) lists them. Renaming one breaks
//     dashboards.
//
// # Concurrency
//
// A Tracer is immutable and safe for concurrent use, as are the spans it
// starts (the SDK locks each span). Inject and Extract are pure functions.
package tracing
