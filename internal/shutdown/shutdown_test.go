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
