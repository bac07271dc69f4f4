package relay

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/segmentio/kafka-go"
)

// backoff returns the pause before retry number attempt (1, 2, ...):
// exponential with full jitter, uniform in [min, min·2^(attempt-1)] and
// capped at max, so nodes that failed together do not retry together.
func backoff(attempt int, min, max time.Duration) time.Duration {
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

// sleep waits d or until ctx is done; it reports whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// kafkaLogger adapts slog to kafka-go's Printf-style logger. kafka-go's
// messages name topics, partitions and errors, never record contents.
func kafkaLogger(log *slog.Logger, level slog.Level, count func()) kafka.Logger {
	return kafka.LoggerFunc(func(format string, args ...any) {
		if count != nil {
			count()
		}
		if log.Enabled(context.Background(), level) {
			log.Log(context.Background(), level, "kafka-go: "+fmt.Sprintf(format, args...))
		}
	})
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
