package retry

import (
	"testing"
	"time"
)

func TestBackoffGrowsExponentiallyWithJitterWithinBounds(t *testing.T) {
	const min, max = 100 * time.Millisecond, 10 * time.Second
	for attempt := 1; attempt <= 100; attempt++ {
		ceil := max
		if attempt < 20 && min<<(attempt-1) < max {
			ceil = min << (attempt - 1)
		}
		seen := map[time.Duration]bool{}
		for i := 0; i < 200; i++ {
			d := Backoff(attempt, min, max)
			if d < min || d > ceil {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, min, ceil)
			}
			seen[d] = true
		}
		if attempt > 1 && len(seen) < 10 {
			t.Fatalf("attempt %d: only %d distinct pauses, want jitter", attempt, len(seen))
		}
	}
}
