package store_test

import (
	"fmt"
	"testing"

	chat "github.com/chatd/chatd"
)

// Every join and leave carries the group's last_seq before it and
// commits with the system entry that says so, one past it: delivery
// tells a join or leave that positions it read hold already from one
// they do not by that seq alone (a read that saw last_seq k holds those
// before k, not one at k). Adds, removals, leaves and an owner's leave
// that passes ownership on all keep to it.
func TestEveryJoinAndLeaveCommitsWithTheEntryOnePastItsSeq(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{}
	st, _ := newStoreRecording(t, rec)
	const owner, admin, member, added = 1, 2, 3, 4
	g := mustGroup(t, st, owner, admin, member)
	if _, err := st.SetRole(ctx, g.ID, owner, admin, chat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, g.ID, owner, "hello")
	seen := len(rec.events())
	check := func(what string, do func() error) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		all := rec.events()
		evs := all[seen:]
		seen = len(all)
		var types []string
		for _, ev := range evs {
			types = append(types, fmt.Sprintf("%s@%d", ev.Type, ev.Seq))
		}
		if len(evs) < 2 || evs[0].Type != chat.EventMemberAdded && evs[0].Type != chat.EventMemberRemoved ||
			evs[1].Type != chat.EventSystemNew || evs[1].Seq != evs[0].Seq+1 {
			t.Errorf("%s published %s, want a join or leave at seq k, then system.new at k+1", what, types)
		}
	}
	check("an add", func() error { _, _, err := st.AddMember(ctx, g.ID, admin, added, chat.RoleMember); return err })
	check("a removal", func() error { return st.RemoveMember(ctx, g.ID, admin, added) })
	check("a leave", func() error { return st.RemoveMember(ctx, g.ID, member, member) })
	check("a re-add", func() error { _, _, err := st.AddMember(ctx, g.ID, owner, member, chat.RoleMember); return err })
	check("the owner's leave", func() error { return st.RemoveMember(ctx, g.ID, owner, owner) })
}
