package relay

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/segmentio/kafka-go"
)

// kafkaLogger adapts slog to kafka-go's Printf-style logger. kafka-go's
// messages name topics, partitions and errors, never record contents.
// count, if not nil, sees every message first.
func kafkaLogger(log *slog.Logger, level slog.Level, count func(format string, args []any)) kafka.Logger {
	return kafka.LoggerFunc(func(format string, args ...any) {
		if count != nil {
			count(format, args)
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
