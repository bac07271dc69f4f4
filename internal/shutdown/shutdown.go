// Package shutdown is how chatd's parts stop their goroutines: a Close
// waits for them as long as its caller's context allows.
package shutdown

import (
	"context"
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
