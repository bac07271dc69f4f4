package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
)

// The badge (the user's unread messages over all their conversations)
// looks up where the watermark points only in the conversations with a
// message after it: a push to a user in 1,000 groups they have read
// looks up the one they have not, not all 1,000 (each was an index
// lookup of the message table per push).
func TestTheBadgeOfAUserInManyReadGroupsLooksUpOnlyTheUnreadOnes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	if _, err := r.pool.Exec(ctx, `
		WITH c AS (INSERT INTO conversation (type, title, last_seq, message_count, last_message_seq, last_message_at)
		           SELECT 'GROUP', 'read', 20, 20, 20, now() FROM generate_series(1, 1000) RETURNING id),
		     m AS (INSERT INTO message (conversation_id, seq, sender_id, client_msg_id, body, msg_no)
		           SELECT c.id, i, 3, gen_random_uuid(), 'old news', i FROM c, generate_series(1, 20) i),
		     -- decided long ago
		     p AS (INSERT INTO push_cursor (conversation_id, seq) SELECT id, 20 FROM c)
		INSERT INTO conversation_member (conversation_id, user_id, role, last_read_seq)
		SELECT c.id, u, CASE WHEN u = 3 THEN 'owner' ELSE 'member' END, CASE WHEN u = 2 AND c.id % 1000 = 0 THEN 17 ELSE 20 END
		FROM c, unnest(ARRAY[2, 3]) u`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	lookups := func() int64 {
		// Backends flush their statistics as they exit.
		r.pool.Reset()
		testkit.WaitFor(t, 5*time.Second, "the pool's backends to exit", func() bool {
			return r.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`) == 0
		})
		return r.count(`SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'message_pkey'`)
	}
	before := lookups()
	stop := r.start(nil)
	r.send(conv, 1, "hello")
	got := r.waitPushes("bob", 1, 5*time.Second)
	stop()
	if got[0].Badge != 4 {
		t.Errorf("badge %d, want 4 (the direct message, 3 in the unread group)", got[0].Badge)
	}
	if n := lookups() - before; n > 100 {
		t.Errorf("a send and its push looked up the message table %d times; want a few, not one per group read", n)
	}
}
