package coalesce

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
)

// recorder is a Flush that keeps every batch, optionally failing.
type recorder struct {
	mu      sync.Mutex
	batches []map[string]int64
	fail    int // fail this many calls first
}

func (r *recorder) flush(_ context.Context, b map[string]int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("down")
	}
	r.batches = append(r.batches, maps.Clone(b))
	return nil
}

func (r *recorder) merged() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int64{}
	for _, b := range r.batches {
		for k, v := range b {
			out[k] = max(out[k], v)
		}
	}
	return out
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

func TestMapMergesPerKeyAndBoundsNewKeys(t *testing.T) {
	m := NewMap[string, int64](Max[int64], 2)
	m.Put("a", 3)
	m.Put("a", 1)
	m.Put("b", 2)
	m.Put("c", 9) // over the bound: dropped
	m.Put("a", 5)
	if got := m.Take(0); !maps.Equal(got, map[string]int64{"a": 5, "b": 2}) || m.Dropped() != 1 {
		t.Fatalf("took %v, dropped %d", got, m.Dropped())
	}
	m.Put("a", 7)
	m.Restore(map[string]int64{"a": 6, "b": 4}) // a failed batch comes back under newer values
	if got := m.Take(0); !maps.Equal(got, map[string]int64{"a": 7, "b": 4}) {
		t.Fatalf("after restore %v", got)
	}
}

func TestWriterFlushesAtMostOncePerIntervalAndAtOnceWhenIdle(t *testing.T) {
	m := NewMap[string, int64](Max[int64], 0)
	r := &recorder{}
	w := NewWriter(m, WriterConfig[string, int64]{Flush: r.flush, Interval: 300 * time.Millisecond})
	defer w.Close(context.Background())
	start := time.Now()
	m.Put("a", 1)
	testkit.WaitFor(t, 5*time.Second, "the first flush", func() bool { return r.calls() == 1 })
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("an idle writer took %v to flush", d)
	}
	for i := range int64(50) {
		m.Put("a", i)
		m.Put("b", i)
	}
	testkit.WaitFor(t, 5*time.Second, "the second flush", func() bool { return r.calls() == 2 })
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("second flush after %v, within the interval", d)
	}
	if got := r.merged(); got["a"] != 49 || got["b"] != 49 {
		t.Fatalf("flushed %v", got)
	}
}

// A session that stops flushes its cursors and waits for it: that must
// not wait out the interval the writer is sleeping through.
func TestFlushDoesNotWaitOutTheInterval(t *testing.T) {
	m := NewMap[string, int64](Max[int64], 0)
	r := &recorder{}
	w := NewWriter(m, WriterConfig[string, int64]{Flush: r.flush, Interval: 5 * time.Second})
	defer w.Close(context.Background())
	m.Put("a", 1)
	testkit.WaitFor(t, 5*time.Second, "the first flush", func() bool { return r.calls() == 1 })
	m.Put("a", 2) // the writer now waits out its interval
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Flush took %v", d)
	}
	if got := r.merged(); got["a"] != 2 {
		t.Fatalf("flushed %v", got)
	}
}

func TestWriterRetriesAFailedFlushAndCloseFlushesTheRest(t *testing.T) {
	m := NewMap[string, int64](Max[int64], 0)
	r := &recorder{fail: 2}
	var errs int
	var mu sync.Mutex
	w := NewWriter(m, WriterConfig[string, int64]{Flush: r.flush, Interval: time.Millisecond, RetryAfter: 10 * time.Millisecond,
		OnError: func(error, int) { mu.Lock(); errs++; mu.Unlock() }})
	m.Put("a", 1)
	testkit.WaitFor(t, 5*time.Second, "a flush after the failures", func() bool { return r.calls() == 1 })
	mu.Lock()
	if errs != 2 {
		t.Errorf("%d errors reported, want 2", errs)
	}
	mu.Unlock()
	m.Put("b", 2)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.merged(); !maps.Equal(got, map[string]int64{"a": 1, "b": 2}) {
		t.Fatalf("flushed %v", got)
	}
}

// Under a steady stream of updates (a delivery's cursor or watermark per
// message), a flush must still wait out the interval: keys put while one
// flush runs are the next interval's, not another flush at once, or the
// writer commits back to back and merges nothing.
func TestWriterKeepsItsIntervalUnderASteadyStreamOfUpdates(t *testing.T) {
	m := NewMap[string, int64](Max[int64], 0)
	r := &recorder{}
	slow := func(ctx context.Context, b map[string]int64) error {
		time.Sleep(10 * time.Millisecond) // a transaction's round trip and commit
		return r.flush(ctx, b)
	}
	w := NewWriter(m, WriterConfig[string, int64]{Flush: slow, Interval: 200 * time.Millisecond})
	start := time.Now()
	var i int64
	for time.Since(start) < 700*time.Millisecond {
		m.Put(string(rune('a'+i%26)), i)
		i++
		time.Sleep(500 * time.Microsecond)
	}
	calls := r.calls()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One at once (the writer was idle), then one per interval begun.
	if calls > 6 {
		t.Fatalf("%d flushes in 700ms with a 200ms interval", calls)
	}
	if got := r.merged(); len(got) != 26 || got[string(rune('a'+(i-1)%26))] != i-1 {
		t.Fatalf("flushed %v after %d puts", got, i)
	}
}
