package shutdown

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestWaitReturnsWhenTheGoroutinesAreDoneOrTheContextEnds(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Wait(ctx, &wg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a goroutine still running: %v, want the context's deadline", err)
	}

	close(release)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Wait(ctx, &wg); err != nil {
		t.Fatalf("Wait once the goroutine is done: %v", err)
	}
}

func TestGroupWaitNamesTheGoroutinesStillRunningWhenTheContextEnds(t *testing.T) {
	var g Group
	release := make(chan struct{})
	g.Go("stuck", func() { <-release })
	g.Go("quick", func() {})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := g.Wait(ctx)
	var sr *StillRunningError
	if !errors.As(err, &sr) || !errors.Is(err, context.DeadlineExceeded) || len(sr.Names) != 1 || sr.Names[0] != "stuck" {
		t.Fatalf("Wait with one goroutine stuck: %v, want it named alone, wrapping the deadline", err)
	}

	close(release)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Wait(ctx); err != nil {
		t.Fatalf("Wait once every goroutine is done: %v", err)
	}
}
