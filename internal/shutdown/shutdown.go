// Package shutdown is how chatd's parts stop their goroutines: a Close
// waits for them as long as its caller's context allows.
package shutdown

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// Wait waits until wg's goroutines are done or ctx ends, whichever is
// first; it returns ctx's error in the second case. The goroutines it
// gave up on go on running: the caller decides what that means.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Group runs named goroutines, so that a Close that stops waiting for them
// can say which ones are still running. The zero Group is ready to use.
type Group struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]int
}

// Go runs f in a goroutine known as name until it returns.
func (g *Group) Go(name string, f func()) {
	g.mu.Lock()
	if g.running == nil {
		g.running = map[string]int{}
	}
	g.running[name]++
	g.mu.Unlock()
	g.wg.Go(func() {
		defer func() {
			g.mu.Lock()
			if g.running[name]--; g.running[name] == 0 {
				delete(g.running, name)
			}
			g.mu.Unlock()
		}()
		f()
	})
}

// Wait waits until the goroutines are done or ctx ends, whichever is
// first. In the second case it returns a *StillRunningError naming the
// goroutines that are still running, which wraps ctx's error.
func (g *Group) Wait(ctx context.Context) error {
	err := Wait(ctx, &g.wg)
	if err == nil {
		return nil
	}
	g.mu.Lock()
	names := make([]string, 0, len(g.running))
	for name := range g.running {
		names = append(names, name)
	}
	g.mu.Unlock()
	if len(names) == 0 { // they finished as ctx ended
		return nil
	}
	slices.Sort(names)
	return &StillRunningError{Names: names, Err: err}
}

// StillRunningError names the goroutines of a Group still running when its
// Wait gave up.
type StillRunningError struct {
	Names []string
	Err   error // the context's
}

func (e *StillRunningError) Error() string {
	return "still running: " + strings.Join(e.Names, ", ") + " (" + e.Err.Error() + ")"
}

func (e *StillRunningError) Unwrap() error { return e.Err }
