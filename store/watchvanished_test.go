package store_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// A watcher whose database host vanishes (its packets go nowhere, and no
// reset ever comes) does not wait on that connection for ever: quiet for
// its check interval, the connection must answer, and when it does not
// the watcher listens again on a new one, which reads the revocations it
// missed meanwhile.
func TestAWatcherWhoseDatabaseVanishedListensAgainAndReadsWhatItMissed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := pgtest.NewVanishing(t)
	var logs logtest.Buffer
	sessions := store.NewSessions(db.Pool)
	sessions.SetWatchCheck(500 * time.Millisecond)
	got := make(chan int64, 16)
	done := make(chan error, 1)
	go func() {
		done <- sessions.Watch(ctx, store.Notices{TokensRevoked: func(u int64, _ time.Time) { got <- u }}, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	testkit.WaitFor(t, 10*time.Second, "the watcher to listen", func() bool {
		return pgtest.QueryOne[int64](t, db.Direct, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'chatd-takeovers'`) == 1
	})

	db.Vanish(t)
	if _, err := store.New(db.Direct, chat.DefaultLimits()).RevokeTokens(ctx, 8); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the watcher to give its silent connection up", func() bool {
		return strings.Contains(logs.String(), "watching other nodes' notices failed")
	})
	db.Return(t)
	select {
	case u := <-got:
		if u != 8 {
			t.Fatalf("revocation of user %d, want 8", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the revocation set while the database was gone never reached the watcher; its log:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch: %v", err)
	}
}
