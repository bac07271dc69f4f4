package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// One account cannot pile up persistent sessions: each connect with a new
// client id, clean start 0 and a session expiry leaves one behind when it
// disconnects, which the connection cap (live connections only) does not
// count, and every leave or removal of the user from a group writes a
// cursor row for each of them under the group's lock, holding every send
// of the group meanwhile (200,000 of them, two days of connects at the
// default per-user connect rate, held a group's sends for 8 s). Opening a
// new persistent session forgets the user's least recently seen offline
// ones beyond store.MaxOfflineSessions; the most recent of them still
// resume.
func TestAUserKeepsAtMostMaxOfflineSessionsPersistentSessionsTheLeastRecentlySeenGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Without the per-user connect rate, which only slows the pile-up.
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONNECT_USER_RATE": "0"})
	const user = 7
	id := func(i int) string { return fmt.Sprintf("device-%03d", i) }
	n := store.MaxOfflineSessions + 5
	for i := range n {
		c, _ := dialAs(t, srv.MQTTAddr(), user, id(i), 5, false)
		disconnect(t, srv, c, id(i))
		// Its end recorded (last seen, no connection) before the next
		// connects: the sessions are seen in the order of i.
		testkit.WaitFor(t, 5*time.Second, id(i)+"'s end recorded", func() bool {
			var ended bool
			_ = srv.Pool.QueryRow(ctx, `SELECT conn_token IS NULL FROM chat_session WHERE client_id = $1`, id(i)).Scan(&ended)
			return ended
		})
	}
	// One more new persistent session, with every other one offline.
	c, _ := dialAs(t, srv.MQTTAddr(), user, id(n), 5, false)
	disconnect(t, srv, c, id(n))
	var stored int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM chat_session WHERE user_id = $1`, user).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := store.MaxOfflineSessions + 1; stored != want {
		t.Fatalf("user %d has %d stored sessions after %d persistent connects, want %d (the newest and the %d most recently seen before it)",
			user, stored, n+1, want, store.MaxOfflineSessions)
	}
	// The most recently seen resume; the least recently seen were forgotten.
	if _, ack := resume(t, srv.MQTTAddr(), user, id(n-1), 5); !ack.SessionPresent {
		t.Errorf("%s, among the most recently seen, resumed without its session", id(n-1))
	}
	if _, ack := resume(t, srv.MQTTAddr(), user, id(0), 5); ack.SessionPresent {
		t.Errorf("%s, the least recently seen, resumed with its session", id(0))
	}
}
