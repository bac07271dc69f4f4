// Package coalesce merges many small updates of the same key into one
// write. A Map collects updates (Put merges a new value into the one
// waiting for its key); a Writer takes what waits and flushes it, at most
// once per interval, until Close, which flushes what is left.
//
// chatd's delivered watermarks, session cursors and presence flags are all
// "the newest value per key wins" updates that arrive per message or per
// connection and need one database write per interval, not per update.
//
// A Group (group.go) is the same for writes whose callers must wait for
// them (acknowledged means stored): values waiting together share a write.
//
// Concurrency: Map is safe for concurrent use and Put never blocks. A
// Writer owns one goroutine, started by NewWriter and stopped by Close. A
// Group runs one goroutine only while it has something to write.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Map holds the updates waiting for a flush, merged per key.
type Map[K comparable, V any] struct {
	merge func(old, new V) V
	max   int

	mu      sync.Mutex
	m       map[K]V
	dropped int64
	ready   chan struct{}
}

// NewMap returns an empty Map. merge combines a waiting value with a new
// one for the same key; max bounds the keys waiting (a Put of a new key
// beyond it is dropped and counted; max <= 0 means unbounded).
func NewMap[K comparable, V any](merge func(old, new V) V, max int) *Map[K, V] {
	return &Map[K, V]{merge: merge, max: max, m: map[K]V{}, ready: make(chan struct{}, 1)}
}

// Put merges v into what waits for k and signals Ready. It never blocks.
func (c *Map[K, V]) Put(k K, v V) {
	c.mu.Lock()
	if old, ok := c.m[k]; ok {
		c.m[k] = c.merge(old, v)
	} else if c.max <= 0 || len(c.m) < c.max {
		c.m[k] = v
	} else {
		c.dropped++
	}
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// Ready receives a value after Puts since the last receive.
func (c *Map[K, V]) Ready() <-chan struct{} { return c.ready }

// Take removes and returns up to limit waiting keys (all when limit <= 0).
func (c *Map[K, V]) Take(limit int) map[K]V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 {
		return nil
	}
	if limit <= 0 || len(c.m) <= limit {
		b := c.m
		c.m = map[K]V{}
		return b
	}
	b := make(map[K]V, limit)
	for k, v := range c.m {
		if len(b) == limit {
			break
		}
		b[k] = v
		delete(c.m, k)
	}
	return b
}

// Restore merges a batch that failed to flush back into the Map, under the
// values put since it was taken.
func (c *Map[K, V]) Restore(batch map[K]V) {
	c.mu.Lock()
	for k, v := range batch {
		if newer, ok := c.m[k]; ok {
			c.m[k] = c.merge(v, newer)
		} else {
			c.m[k] = v
		}
	}
	c.mu.Unlock()
}

// Len is the number of keys waiting.
func (c *Map[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Dropped is how many new keys Put refused because max keys were waiting.
func (c *Map[K, V]) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Max keeps the greater value: the merge of watermarks and cursors.
func Max[V int64 | int](old, new V) V { return max(old, new) }

// Last keeps the newer value.
func Last[V any](_, new V) V { return new }

// WriterConfig configures a Writer.
type WriterConfig[K comparable, V any] struct {
	// Flush writes one batch. An error puts the batch back (Restore) and
	// retries after RetryAfter.
	Flush func(ctx context.Context, batch map[K]V) error
	// Interval is the least time between the starts of two flushes.
	// Updates arriving in an idle moment flush at once.
	Interval time.Duration
	// MaxBatch caps the keys of one Flush call (0: all).
	MaxBatch int
	// Timeout bounds one Flush call (10s).
	Timeout time.Duration
	// RetryAfter is the pause after a failed flush (500ms).
	RetryAfter time.Duration
	// OnError is told about failed flushes (may be nil).
	OnError func(err error, keys int)
}

// Writer flushes a Map on its own goroutine.
type Writer[K comparable, V any] struct {
	m    *Map[K, V]
	cfg  WriterConfig[K, V]
	sync chan chan error
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewWriter starts flushing m; stop it with Close.
func NewWriter[K comparable, V any](m *Map[K, V], cfg WriterConfig[K, V]) *Writer[K, V] {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 500 * time.Millisecond
	}
	w := &Writer[K, V]{m: m, cfg: cfg, sync: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Flush writes everything put before the call and waits for it.
func (w *Writer[K, V]) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case w.sync <- reply:
	case <-w.done:
		return errors.New("coalesce: writer closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes what waits and stops the writer. It is idempotent.
func (w *Writer[K, V]) Close(ctx context.Context) error {
	w.once.Do(func() { close(w.stop) })
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close coalescing writer: %w", ctx.Err())
	}
}

func (w *Writer[K, V]) run() {
	defer close(w.done)
	var last time.Time
	var retry <-chan time.Time
	for {
		select {
		case <-w.stop:
			w.drainAll()
			return
		case reply := <-w.sync:
			reply <- w.drain()
			continue
		case <-retry:
			retry = nil
		case <-w.m.Ready():
			if retry != nil {
				continue // the pending retry flushes these too
			}
		}
		if wait := time.Until(last.Add(w.cfg.Interval)); wait > 0 {
			// A caller waiting in Flush does not wait out the interval.
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case reply := <-w.sync:
				t.Stop()
				reply <- w.drain()
				continue
			case <-w.stop:
				t.Stop()
				w.drainAll()
				return
			}
		}
		last = time.Now()
		if err := w.drain(); err != nil {
			retry = time.After(w.cfg.RetryAfter)
		}
	}
}

// drain flushes what waits when it starts, in batches of at most
// MaxBatch keys; on a failure the batch goes back and the error is
// returned. Keys put while it flushes wait for the next interval: under a
// steady stream of updates, flushing them at once would commit back to
// back, each write carrying only what arrived during the one before, and
// merge nothing.
func (w *Writer[K, V]) drain() error { return w.flushUpTo(w.m.Len()) }

// drainAll flushes until nothing waits, what is put meanwhile included:
// Close's last flush.
func (w *Writer[K, V]) drainAll() error {
	for w.m.Len() > 0 {
		if err := w.flushUpTo(w.m.Len()); err != nil {
			return err
		}
	}
	return nil
}

// flushUpTo flushes at least n waiting keys (fewer if fewer wait).
func (w *Writer[K, V]) flushUpTo(n int) error {
	for n > 0 {
		batch := w.m.Take(w.cfg.MaxBatch)
		if len(batch) == 0 {
			return nil
		}
		n -= len(batch)
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
		err := w.cfg.Flush(ctx, batch)
		cancel()
		if err != nil {
			w.m.Restore(batch)
			if w.cfg.OnError != nil {
				w.cfg.OnError(err, len(batch))
			}
			return err
		}
	}
	return nil
}
