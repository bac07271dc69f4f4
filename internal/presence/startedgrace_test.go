package presence_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// TestAJoinDuringAReconnectsGraceGivesTheStateTheOthersWereTold: user 2,
// online, loses their connection and is back within the grace (nobody is
// told anything: the others go on showing them online). Meanwhile user 1
// joins a group of theirs and is given user 2's state for the join: it
// must be online, as the others were told; offline, it would stay so,
// since the reconnect within the grace announces nothing.
func TestAJoinDuringAReconnectsGraceGivesTheStateTheOthersWereTold(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rec := &membershipEvents{}
	st := store.New(pool, chat.DefaultLimits(), store.WithPublisher(rec))
	g, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 2, Title: "g"})
	if err != nil {
		t.Fatal(err)
	}
	tr, pub, connect := startTrackerWithTwo(t, pool, 3*time.Second)
	ps := store.NewPresence(pool, presence.TTL(5*time.Second))
	testkit.WaitFor(t, 5*time.Second, "user 2 announced online", func() bool {
		var told bool
		err := pool.QueryRow(ctx, `SELECT announced_online FROM user_presence WHERE user_id = 2`).Scan(&told)
		return err == nil && told
	})

	tr.Disconnected("two", 2)
	testkit.WaitFor(t, 5*time.Second, "user 2's connection recorded gone", func() bool {
		p, err := ps.Presence(ctx, 2)
		return err == nil && !p.Online
	})
	if _, _, err := st.AddMember(ctx, g.ID, 2, 1, ""); err != nil {
		t.Fatal(err)
	}
	before := len(pub.about(2))
	tr.SharingStarted(rec.last(t, chat.EventMemberAdded, 1))
	testkit.WaitFor(t, 2*time.Second, "user 2's state given to user 1 for the join", func() bool { return len(pub.about(2)) > before })
	ev := pub.about(2)[before]
	if ev.Online == nil || !*ev.Online {
		t.Fatalf("user 1 was given user 2 offline (last seen %v) during user 2's grace: the others were told online, and the reconnect tells nobody", ev.LastSeen)
	}
	connect("two", "a/2/1", 2) // back within the grace
}
