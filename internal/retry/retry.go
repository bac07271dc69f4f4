// Package retry holds the pause between attempts that every background
// loop of chatd (the Kafka relay and consumer, the push decider and
// sender) uses after a failure, so they back off alike.
//
// Both functions are safe for concurrent use.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff returns the pause before retry number attempt (1, 2, ...):
// exponential with full jitter, uniform in [min, min·2^(attempt-1)] and
// capped at max, so nodes that failed together do not retry together.
func Backoff(attempt int, min, max time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	ceil := max
	if attempt <= 30 {
		if c := min << (attempt - 1); c > 0 && c < max {
			ceil = c
		}
	}
	if ceil <= min {
		return min
	}
	return min + rand.N(ceil-min+1)
}

// Sleep waits d or until ctx is done; it reports whether the full d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
