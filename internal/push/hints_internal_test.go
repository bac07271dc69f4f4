package push

import (
	"slices"
	"testing"
	"time"
)

func TestHintsAreTakenWhenDueEarliestRequestWinning(t *testing.T) {
	q := newHintQueue()
	t0 := time.Unix(1000, 0)
	q.add(1, t0.Add(2*time.Second))
	q.add(2, t0.Add(time.Second))
	q.add(1, t0.Add(5*time.Second)) // later: ignored
	q.add(3, t0.Add(3*time.Second))
	q.add(3, t0) // earlier: wins
	if got := q.take(t0, 10); !slices.Equal(got, []int64{3}) {
		t.Errorf("due at t0: %v, want [3]", got)
	}
	if got := q.take(t0.Add(2*time.Second), 1); !slices.Equal(got, []int64{2}) {
		t.Errorf("first of two due: %v, want [2]", got)
	}
	if got := q.take(t0.Add(10*time.Second), 10); !slices.Equal(got, []int64{1}) {
		t.Errorf("the rest: %v, want [1] once", got)
	}
	if q.len() != 0 || len(q.take(t0.Add(time.Hour), 10)) != 0 {
		t.Errorf("left: %d", q.len())
	}
	for i := range int64(5000) {
		q.add(i, t0.Add(time.Hour))
		q.add(i, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(q.heap) > 2*q.len()+1024 {
		t.Errorf("heap of %d entries for %d hints: not compacted", len(q.heap), q.len())
	}
	if got := q.take(t0.Add(time.Hour), 10000); len(got) != 5000 {
		t.Errorf("took %d, want 5000", len(got))
	}
}
