package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// A revocation refuses the user's tokens issued before the next whole
// second (iat has whole seconds: one issued in the second of the
// revocation may be older than it), never moves back, and reaches every
// node's watcher: by announcement while it listens, and, when it was set
// while the watcher did not listen (before it started, or while its
// connection was down), by reading what was set since.
func TestARevocationIsAWholeSecondAheadAndReachesEveryWatcher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, pool := pgtest.NewStore(t, chat.DefaultLimits())
	if _, err := pool.Exec(ctx, `INSERT INTO push_device (user_id, platform, address) VALUES (5, 'fcm', 'phone-of-5'), (6, 'fcm', 'phone-of-6')`); err != nil {
		t.Fatal(err)
	}
	before, err := st.RevokeTokens(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if before.Nanosecond() != 0 || !before.After(time.Now().Add(-time.Second)) || before.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("revoked before %v, want the next whole second", before)
	}
	if got, err := st.TokensRevokedBefore(ctx, 5); err != nil || !got.Equal(before) {
		t.Fatalf("TokensRevokedBefore = %v, %v; want %v", got, err, before)
	}
	if got, err := st.TokensRevokedBefore(ctx, 6); err != nil || !got.IsZero() {
		t.Fatalf("a user who revoked nothing: %v, %v", got, err)
	}
	// The push devices of the signed-out sessions go with them.
	var devices []string
	if err := queryStrings(ctx, pool, &devices, `SELECT address FROM push_device ORDER BY address`); err != nil {
		t.Fatal(err)
	}
	if len(devices) != 1 || devices[0] != "phone-of-6" {
		t.Fatalf("push devices after user 5 revoked their tokens: %v, want user 6's alone", devices)
	}
	// Set back by hand: a second revocation never moves it back.
	if _, err := pool.Exec(ctx, `UPDATE token_revocation SET revoked_before = revoked_before + interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if again, err := st.RevokeTokens(ctx, 5); err != nil || !again.Equal(before.Add(time.Hour)) {
		t.Fatalf("revoking again = %v, %v; want %v kept", again, err, before.Add(time.Hour))
	}

	type notice struct {
		user   int64
		before time.Time
	}
	got := make(chan notice, 16)
	done := make(chan error, 1)
	go func() {
		done <- store.NewSessions(pool).Watch(ctx, store.Notices{TokensRevoked: func(u int64, b time.Time) { got <- notice{u, b} }}, slog.Default())
	}()
	next := func(what string) notice {
		t.Helper()
		select {
		case n := <-got:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never reached the watcher", what)
		}
		return notice{}
	}
	if n := next("a revocation set before the watcher listened"); n.user != 5 || !n.before.Equal(before.Add(time.Hour)) {
		t.Fatalf("notice %+v, want user 5 before %v", n, before.Add(time.Hour))
	}
	b6, err := st.RevokeTokens(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	if n := next("an announced revocation"); n.user != 6 || !n.before.Equal(b6) {
		t.Fatalf("notice %+v, want user 6 before %v", n, b6)
	}
	// The watcher's connection dies; what is revoked until it listens
	// again is read then.
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'chatd-takeovers'`); err != nil {
		t.Fatal(err)
	}
	b7, err := st.RevokeTokens(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	for {
		n := next("a revocation set while the watcher's connection was down")
		if n.user == 7 && n.before.Equal(b7) {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch: %v", err)
	}
}

// queryStrings reads the one text column of sql's rows into out.
func queryStrings(ctx context.Context, pool *pgxpool.Pool, out *[]string, sql string) error {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return err
	}
	*out, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return err
}
