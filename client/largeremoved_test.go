package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestARemovedMemberOfALargeGroupGetsWhatTheirLeaveOwedWithBodiesOnReconnect:
// in a large group (over CHAT_LARGE_GROUP members) live messages come
// without their body and the client reads it through history. A member
// removed while their phone was offline gets, when it reconnects (a
// persistent session), every message up to the removal with its body,
// which history, refusing a user no longer a member, could not give it,
// and nothing sent after the removal.
func TestARemovedMemberOfALargeGroupGetsWhatTheirLeaveOwedWithBodiesOnReconnect(t *testing.T) {
	t.Parallel()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{"CHAT_LARGE_GROUP": "2"}), nil)
	a := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	ctx := ctxFor(t, 60*time.Second)
	g, err := a.CreateGroup(ctx, "big", []int64{2, 3, 4}) // three members left after the removal: large still
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	cfg.SessionDir = t.TempDir()
	b := connect(t, cfg)
	sendN(t, a, g.ID, 1, "read") // seq 1, completed through history while a member
	if m := messages(t, b, g.ID, 1, 10*time.Second); m[0].Body != "read 1" {
		t.Fatalf("the first message came as %+v, want its body %q", m[0], "read 1")
	}

	cutOff(t, px, b)
	owed := sendN(t, a, g.ID, 3, "owed")
	if err := a.RemoveMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 1, "after the removal")
	px.Resume()

	got := messages(t, b, g.ID, len(owed), 15*time.Second)
	for i, m := range got {
		if want := fmt.Sprint("owed ", i+1); m.Seq != owed[i] || m.Body != want {
			t.Errorf("owed message %d came as seq %d body %q, want seq %d body %q", i+1, m.Seq, m.Body, owed[i], want)
		}
	}
	noMoreMessages(t, b, g.ID, 500*time.Millisecond)
}
