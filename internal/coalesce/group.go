package coalesce

import (
	"context"
	"sync"
)

// Group is group commit for writes whose callers wait: Do queues a value
// for its key and returns once a write holding it has finished, with that
// write's error. Values that wait together share one write (the newest per
// key wins), so a thousand clients subscribing in the same second cost a
// handful of database commits rather than a thousand, and each still
// learns that its own value is stored.
//
// A Group holds no goroutine while idle: the first Do that finds no write
// running starts one goroutine, which writes what waits, batch after
// batch, and ends when nothing does. Do is safe for concurrent use.
type Group[K comparable, V any] struct {
	write   func(ctx context.Context, batch map[K]V) error
	mu      sync.Mutex
	pending map[K]V
	waiters []chan error
	running bool
}

// NewGroup returns a Group that writes batches with write; ctx bounds
// each write.
func NewGroup[K comparable, V any](write func(ctx context.Context, batch map[K]V) error) *Group[K, V] {
	return &Group[K, V]{write: write}
}

// Do stores v under k with the next write and waits for it. When ctx ends
// first, Do returns ctx's error; the value may still be written.
func (g *Group[K, V]) Do(ctx context.Context, k K, v V) error {
	done := make(chan error, 1)
	g.mu.Lock()
	if g.pending == nil {
		g.pending = map[K]V{}
	}
	g.pending[k] = v
	g.waiters = append(g.waiters, done)
	if !g.running {
		g.running = true
		go g.run(context.WithoutCancel(ctx))
	}
	g.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes batches until none waits. Each write runs under the context
// of the Do that started the goroutine, without its cancellation.
func (g *Group[K, V]) run(ctx context.Context) {
	for {
		g.mu.Lock()
		batch, waiters := g.pending, g.waiters
		g.pending, g.waiters = nil, nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		err := g.write(ctx, batch)
		for _, w := range waiters {
			w <- err
		}
	}
}
