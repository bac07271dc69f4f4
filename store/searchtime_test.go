package store_test

import (
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// before and after are RFC 3339 times, nanoseconds allowed; a message's
// createdAt has microseconds. A message written at T is before T+500ns:
// sent to PostgreSQL as is, that time was cut to T, and the message, not
// before T, was left out. after T-500ns (cut to T-1µs) finds it too.
func TestSearchBeforeATimeWithNanosecondsFindsTheMessageOfItsMicrosecond(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	m := mustSend(t, st, g.ID, 1, "hello world")
	for i, p := range plans {
		for _, c := range []struct {
			what          string
			before, after time.Time
			want          int
		}{
			{"before T+500ns", m.CreatedAt.Add(500 * time.Nanosecond), time.Time{}, 1},
			{"before T+1ns", m.CreatedAt.Add(time.Nanosecond), time.Time{}, 1},
			{"before T", m.CreatedAt, time.Time{}, 0},
			{"after T-500ns", time.Time{}, m.CreatedAt.Add(-500 * time.Nanosecond), 1},
			{"after T", time.Time{}, m.CreatedAt, 0},
			{"after T-1ns and before T+1ns", m.CreatedAt.Add(time.Nanosecond), m.CreatedAt.Add(-time.Nanosecond), 1},
		} {
			q := chat.SearchQuery{UserID: 2, Text: "hello"}
			if !c.before.IsZero() {
				q.Before = &c.before
			}
			if !c.after.IsZero() {
				q.After = &c.after
			}
			if got := len(search(t, p, q).Results); got != c.want {
				t.Errorf("plan %d: %s (createdAt %s): %d hits, want %d", i, c.what, m.CreatedAt.Format(time.RFC3339Nano), got, c.want)
			}
		}
	}
}
