package coalesce

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGroupCallersWaitingTogetherShareOneWriteAndEachSeesItsResult(t *testing.T) {
	var writes atomic.Int64
	var mu sync.Mutex
	stored := map[string]int{}
	g := NewGroup(func(_ context.Context, b map[string]int) error {
		writes.Add(1)
		time.Sleep(20 * time.Millisecond) // one commit
		mu.Lock()
		defer mu.Unlock()
		for k, v := range b {
			stored[k] = v
		}
		return nil
	})
	const callers = 200
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if err := g.Do(context.Background(), strconv.Itoa(i), i); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if stored[strconv.Itoa(i)] != i {
				t.Errorf("Do(%d) returned before its value was written", i)
			}
		})
	}
	wg.Wait()
	if n := writes.Load(); n > 20 {
		t.Fatalf("%d callers made %d writes; want them to share", callers, n)
	}
	t.Logf("%d callers, %d writes", callers, writes.Load())
}

func TestGroupReportsAFailedWriteToItsCallers(t *testing.T) {
	fail := errors.New("down")
	var calls atomic.Int64
	g := NewGroup(func(_ context.Context, b map[string]int) error {
		if calls.Add(1) == 1 {
			return fail
		}
		return nil
	})
	if err := g.Do(context.Background(), "a", 1); !errors.Is(err, fail) {
		t.Fatalf("first write: %v, want the failure", err)
	}
	if err := g.Do(context.Background(), "a", 2); err != nil {
		t.Fatalf("second write: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, "b", 1); !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("cancelled caller: %v", err)
	}
}
