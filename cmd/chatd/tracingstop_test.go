package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/tracing"
)

// The spans still queued at exit are flushed within what is left of the
// stop's bound (the shutdown budget and the node's cleanup grace after
// it), not within 5 s more: a collector that does not answer used to add
// those 5 s to a stop that had already spent its bound, 35 s against the
// unit's TimeoutStopSec=30s. With a deadline already near, the flush gives
// up by it.
func TestTheTracingFlushKeepsToTheStopsDeadline(t *testing.T) {
	// A collector that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	// The exporter reads the process's environment itself.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	tp, _, err := tracing.FromEnv(context.Background(), os.Getenv, tracing.Identity{Version: "test", Instance: "t"})
	if err != nil || tp == nil {
		t.Fatalf("tracing: %v, %v", tp, err)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "queued")
	span.End()
	start := time.Now()
	shutdownTracing(tp, slog.New(slog.DiscardHandler), start.Add(300*time.Millisecond))
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the flush took %v past a deadline 300ms away", took)
	}
}
