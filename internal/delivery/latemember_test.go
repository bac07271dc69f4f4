package delivery_test

import (
	"context"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/delivery"
)

// A member removed and added back, whose removal then arrives again (the
// old relay leader's batch landing late, Kafka redelivering): the late
// removal neither drops them from the member index nor ends their stream,
// and what is sent next reaches them live.
func TestALateDuplicateRemovalAfterTheRejoinKeepsTheMemberLive(t *testing.T) {
	r := removedAndBack(t, delivery.Options{})
	f, h, u, want, away := r.f, r.h, r.u, r.want, r.away
	h.Publish(r.removed) // again, late
	want = append(want, sendSeqs(t, h, f, 1)...)
	ackAndWant(t, h, f, u, want, away)
}

// The same when the member index forgot the conversation in between (past
// MemberIndexSize, the least recently routed goes), and with it which
// membership events of the member it applied: read again, it routes the
// late removal, and the session, which follows the membership that began
// after it, tells it is late. The member stays live, gets nothing twice,
// and is not told again that they were removed.
func TestALateDuplicateRemovalAfterTheRejoinAndAnEvictionKeepsTheMemberLive(t *testing.T) {
	ctx := context.Background()
	r := removedAndBack(t, delivery.Options{MemberIndexSize: 1})
	f, h, u, want, away := r.f, r.h, r.u, r.want, r.away
	other, err := f.svc.CreateGroup(ctx, 1, "other", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(chat.ConversationCreatedEvent(other, 1), sendAs(t, f, other.ID, 1)) // its members take the index's one place
	waitSeqs(t, u, other.ID, 1)
	h.Publish(r.removed) // again, late
	want = append(want, sendSeqs(t, h, f, 1)...)
	ackAndWant(t, h, f, u, want, away)
	if n := events(u, chat.EventMemberRemoved, f.conv.ID); n != 1 {
		t.Fatalf("the member was told %d times that they were removed, want once", n)
	}
}

// rejoined is a member removed (removed, the event) while their session
// u was attached, who missed away and was added back, with want the
// entries delivered to them so far.
type rejoined struct {
	f       fixture
	h       *delivery.Hub
	u       *fakeConn
	want    []int64
	removed chat.Event
	away    []int64
}

func removedAndBack(t *testing.T, o delivery.Options) rejoined {
	t.Helper()
	f := setup(t)
	h := newHub(t, f, o)
	r := rejoined{f: f, h: h, u: attach(t, h, f, "phone", false, false)}
	r.want = sendSeqs(t, h, f, 1)
	r.removed = removeEvent(t, f)
	h.Publish(r.removed)
	r.away = sendSeqs(t, h, f, 1)
	join(t, h, f, 2)
	r.want = append(r.want, sendSeqs(t, h, f, 1)...)
	return r
}
