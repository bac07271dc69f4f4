// Package logtest holds what tests read a component's log through: a
// buffer safe to write while the test reads it, and a slog handler that
// counts messages. It imports nothing of chatd, so any package's
// in-package tests can use it without an import cycle.
package logtest

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer that a logger or a subprocess writes while the
// test reads it: without the lock the race detector flags every such test.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Counter is a slog.Handler that records every message, whatever its
// level, for tests that count how often something was logged.
type Counter struct {
	mu   sync.Mutex
	msgs []string
}

func (c *Counter) Enabled(context.Context, slog.Level) bool { return true }

func (c *Counter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, r.Message)
	c.mu.Unlock()
	return nil
}

func (c *Counter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *Counter) WithGroup(string) slog.Handler      { return c }

// Count is how many messages so far contain sub.
func (c *Counter) Count(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}
