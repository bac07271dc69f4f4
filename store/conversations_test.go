package store_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

func TestOpenDirectConcurrentCallsForOnePairYieldOneConversation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const a, b, callers = 7, 3, 20
	type result struct {
		conv    chat.Conversation
		created bool
		err     error
	}
	results := make([]result, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user, peer := int64(a), int64(b)
			if i%2 == 1 {
				user, peer = peer, user
			}
			<-start
			r := &results[i]
			r.conv, r.created, r.err = st.OpenDirect(ctx, user, peer)
		}()
	}
	close(start)
	wg.Wait()

	created := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		if r.conv.ID != results[0].conv.ID {
			t.Fatalf("caller %d got conversation %d, caller 0 got %d", i, r.conv.ID, results[0].conv.ID)
		}
		if r.created {
			created++
		}
		if r.conv.Type != chat.Direct || len(r.conv.Members) != 2 ||
			r.conv.Members[0].UserID != b || r.conv.Members[1].UserID != a ||
			r.conv.Members[0].Role != chat.RoleMember || r.conv.Members[1].Role != chat.RoleMember {
			t.Fatalf("caller %d got %+v", i, r.conv)
		}
	}
	if created != 1 {
		t.Fatalf("%d callers report created, want 1", created)
	}
	// The losers' conversation rows were rolled back, not left behind.
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation`); n != 1 {
		t.Fatalf("%d conversations exist, want 1", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM direct_pair WHERE user_low = $1 AND user_high = $2`, b, a); n != 1 {
		t.Fatalf("%d direct_pair rows, want 1", n)
	}
	evs := outboxEvents(t, pool, results[0].conv.ID, chat.EventConversationCreated)
	if len(evs) != 1 || !slices.Equal(evs[0].Members, []int64{b, a}) || evs[0].ConvType != chat.Direct {
		t.Fatalf("conversation.created events: %+v", evs)
	}

	again, created2, err := st.OpenDirect(ctx, a, b)
	if err != nil || created2 || again.ID != results[0].conv.ID {
		t.Fatalf("reopening: %+v created=%v err=%v", again, created2, err)
	}
	_, _, err = st.OpenDirect(ctx, a, a)
	wantCode(t, "direct with oneself", err, chat.CodeInvalid)
	other, created3, err := st.OpenDirect(ctx, a, 11)
	if err != nil || !created3 || other.ID == again.ID {
		t.Fatalf("another pair: %+v created=%v err=%v", other, created3, err)
	}
}

func TestCreateGroupMembersRolesAndEvents(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	conv, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 5, Title: "team", Members: []int64{9, 3, 9, 5}})
	if err != nil {
		t.Fatal(err)
	}
	if conv.Type != chat.Group || conv.Title != "team" || conv.LastSeq != 0 || conv.LastMessageAt != nil || conv.CreatedAt.IsZero() {
		t.Fatalf("created %+v", conv)
	}
	var got []chat.Member
	for _, m := range conv.Members {
		got = append(got, chat.Member{UserID: m.UserID, Role: m.Role})
		if m.JoinedAt.IsZero() || m.LastReadSeq != 0 || m.LastDeliveredSeq != 0 {
			t.Fatalf("member %+v", m)
		}
	}
	want := []chat.Member{{UserID: 3, Role: chat.RoleMember}, {UserID: 5, Role: chat.RoleOwner}, {UserID: 9, Role: chat.RoleMember}}
	if !slices.Equal(got, want) {
		t.Fatalf("members %+v, want %+v", got, want)
	}
	// One conversation.created lists the founders: n deliveries, not n².
	evs := outboxEvents(t, pool, conv.ID, chat.EventConversationCreated)
	if len(evs) != 1 {
		t.Fatalf("%d conversation.created events, want 1", len(evs))
	}
	if ev := evs[0]; !slices.Equal(ev.Members, []int64{3, 5, 9}) || ev.ActorID != 5 ||
		ev.ConvType != chat.Group || ev.Title == nil || *ev.Title != "team" {
		t.Fatalf("conversation.created: %+v", ev)
	}
	if n := len(outboxEvents(t, pool, conv.ID, chat.EventMemberAdded)); n != 0 {
		t.Fatalf("%d member.added events for founders, want none", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND join_seq <> 0`, conv.ID); n != 0 {
		t.Fatalf("%d founding members with join_seq <> 0", n)
	}
	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "bad\x00title"})
	wantCode(t, "title with NUL", err, chat.CodeInvalid)
	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "t", Members: []int64{0}})
	wantCode(t, "member id 0", err, chat.CodeInvalid)
}

// A create repeated with its key (the first answer lost on a weak
// network) answers the group the first made, as the creator sees it now,
// and writes nothing: no second group, no event. Racing creates with one
// key make one group. The key is the creator's: another creator's same key
// is another group; the key asking for another group is a conflict; a
// create without a key makes a group each time, as before.
func TestAGroupCreateRepeatedWithItsKeyAnswersTheFirstGroup(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const creator, other = 1, 7
	groups := func() int64 { return queryInt(t, pool, `SELECT count(*) FROM conversation`) }
	events := func() int64 { return queryInt(t, pool, `SELECT count(*) FROM outbox`) }
	key := uuid.NewString()
	req := chat.GroupRequest{CreatorID: creator, Title: "team", Members: []int64{3, 2}, Key: key}
	first, created, err := st.CreateGroup(ctx, req)
	if err != nil || !created {
		t.Fatalf("create: created=%v, %v", created, err)
	}
	nGroups, nEvents := groups(), events()
	req.Members = []int64{2, 3, 2} // the same members, as a retry may list them
	again, created, err := st.CreateGroup(ctx, req)
	if err != nil || created {
		t.Fatalf("retried create: created=%v, %v; want the first group, not created", created, err)
	}
	if again.ID != first.ID || again.Title != first.Title || !slices.Equal(memberIDs(again), memberIDs(first)) {
		t.Fatalf("retried create answered %+v, want %+v", again, first)
	}
	if g, e := groups(), events(); g != nGroups || e != nEvents {
		t.Fatalf("a retried create wrote: %d groups and %d events, then %d and %d", nGroups, nEvents, g, e)
	}

	// Racing creates with one key: one group, the others answer it.
	raceKey := uuid.NewString()
	ids := make([]int64, 6)
	made := make([]bool, 6)
	errs := concurrently(len(ids), func(i int) error {
		c, created, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "race", Members: []int64{2}, Key: raceKey})
		ids[i], made[i] = c.ID, created
		return err
	})
	tally(t, "racing keyed creates", errs, func(error) bool { return false })
	if n := len(slices.DeleteFunc(slices.Clone(made), func(b bool) bool { return !b })); n != 1 {
		t.Fatalf("%d racing creates made a group, want 1", n)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("racing creates answered groups %v, want one", ids)
		}
	}

	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "another", Members: []int64{2, 3}, Key: key})
	wantCode(t, "the key for another title", err, chat.CodeConflict)
	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "team", Members: []int64{2}, Key: key})
	wantCode(t, "the key for other members", err, chat.CodeConflict)
	theirs, created, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: other, Title: "team", Members: []int64{2, 3}, Key: key})
	if err != nil || !created || theirs.ID == first.ID {
		t.Fatalf("another creator's same key: %+v created=%v, %v; want a group of theirs", theirs, created, err)
	}
	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "team", Key: "not-a-uuid"})
	wantCode(t, "a key that is not a UUID", err, chat.CodeInvalid)
	before := groups()
	for range 2 {
		if _, created, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "team", Members: []int64{2, 3}}); err != nil || !created {
			t.Fatalf("create without a key: created=%v, %v", created, err)
		}
	}
	if n := groups(); n != before+2 {
		t.Fatalf("two creates without a key made %d groups, want 2", n-before)
	}

	// The creator left since: their retry is refused as any request of
	// theirs about the group is.
	mustRemove(t, ctx, st, first.ID, creator, creator, "creator leaves")
	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "team", Members: []int64{2, 3}, Key: key})
	wantCode(t, "the creator's retry after leaving", err, chat.CodeNotMember)
}

// A group of its creator alone (no other members yet) made with a key
// is made, and its retry answers it, as for any other group: the key's
// record holds an empty member list, not none.
func TestAKeyedCreateOfAGroupOfItsCreatorAloneMakesIt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	req := chat.GroupRequest{CreatorID: 1, Title: "notes", Key: uuid.NewString()}
	first, created, err := st.CreateGroup(ctx, req)
	if err != nil || !created {
		t.Fatalf("keyed create of a group of one: created=%v, %v", created, err)
	}
	req.Members = []int64{1} // the creator listed too: still alone
	again, created, err := st.CreateGroup(ctx, req)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("its retry: group %d created=%v, %v; want group %d, not created", again.ID, created, err, first.ID)
	}
	_, _, err = st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "notes", Members: []int64{2}, Key: req.Key})
	wantCode(t, "the key of a group of one for one of two", err, chat.CodeConflict)
}

func memberIDs(c chat.Conversation) []int64 {
	ids := make([]int64, len(c.Members))
	for i, m := range c.Members {
		ids[i] = m.UserID
	}
	return ids
}

func TestMembershipRulesForOwnerAdminAndMember(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, alice, bob, carol = 1, 2, 3, 4
	conv := mustGroup(t, st, owner, alice, bob, carol)
	sendN(t, st, conv.ID, owner, 3, "before they joined")
	events := func() int { return len(outboxEvents(t, pool, conv.ID, "")) }
	before := events()

	_, _, err := st.AddMember(ctx, conv.ID, alice, 10, chat.RoleMember)
	wantCode(t, "member adds", err, chat.CodeForbidden)
	_, _, err = st.AddMember(ctx, conv.ID, 99, 10, chat.RoleMember)
	wantCode(t, "non-member adds", err, chat.CodeNotMember)
	_, _, err = st.AddMember(ctx, conv.ID, owner, 10, chat.RoleOwner)
	wantCode(t, "second owner", err, chat.CodeInvalid)
	err = st.RemoveMember(ctx, conv.ID, alice, bob)
	wantCode(t, "member removes another", err, chat.CodeForbidden)
	err = st.RemoveMember(ctx, conv.ID, 99, bob)
	wantCode(t, "non-member removes", err, chat.CodeNotMember)
	err = st.RemoveMember(ctx, conv.ID, owner, 77)
	wantCode(t, "removing a non-member", err, chat.CodeNotFound)
	if n := events(); n != before {
		t.Fatalf("refused changes wrote %d events", n-before)
	}

	// The owner makes an admin; new members start read up to now.
	const admin, newbie = 5, 6
	m, _, err := st.AddMember(ctx, conv.ID, owner, admin, chat.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if m.UserID != admin || m.Role != chat.RoleAdmin || m.LastReadSeq != 3 || m.LastDeliveredSeq != 3 || m.JoinedAt.IsZero() {
		t.Fatalf("added %+v", m)
	}
	if n := queryInt(t, pool, `SELECT join_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = $2`, conv.ID, admin); n != 3 {
		t.Fatalf("join_seq = %d, want 3", n)
	}
	if m, _, err = st.AddMember(ctx, conv.ID, admin, newbie, ""); err != nil || m.Role != chat.RoleMember {
		t.Fatalf("admin adds: %+v, %v", m, err)
	}
	page, err := st.Inbox(ctx, newbie, 0, "")
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].Unread != 0 {
		t.Fatalf("newcomer's inbox: %+v, %v", page, err)
	}
	// Adding someone already there is a no-op.
	before = events()
	if m, _, err = st.AddMember(ctx, conv.ID, owner, admin, chat.RoleMember); err != nil || m.Role != chat.RoleAdmin {
		t.Fatalf("re-adding the admin: %+v, %v", m, err)
	}
	if n := events(); n != before {
		t.Fatal("re-adding an existing member wrote an event")
	}

	err = st.RemoveMember(ctx, conv.ID, admin, owner)
	wantCode(t, "admin removes the owner", err, chat.CodeForbidden)
	mustRemove(t, ctx, st, conv.ID, admin, newbie, "admin removes a member")
	mustRemove(t, ctx, st, conv.ID, bob, bob, "member leaves")
	mustRemove(t, ctx, st, conv.ID, owner, admin, "owner removes the admin")
	mustRemove(t, ctx, st, conv.ID, owner, owner, "owner leaves")
	ids, err := st.Members(ctx, conv.ID)
	if err != nil || !slices.Equal(ids, []int64{alice, carol}) {
		t.Fatalf("members left: %v, %v", ids, err)
	}
	for _, u := range []int64{alice, carol} {
		if ok, err := st.IsMember(ctx, conv.ID, u); err != nil || !ok {
			t.Fatalf("IsMember(%d) = %v, %v", u, ok, err)
		}
	}
	if ok, err := st.IsMember(ctx, conv.ID, owner); err != nil || ok {
		t.Fatalf("IsMember(owner who left) = %v, %v", ok, err)
	}

	added := outboxEvents(t, pool, conv.ID, chat.EventMemberAdded)
	if len(added) != 2 || added[0].UserID != admin || added[0].ActorID != owner || added[0].Role != chat.RoleAdmin ||
		added[0].Seq != 3 || added[1].UserID != newbie || added[1].ActorID != admin || added[1].Seq != 4 {
		t.Fatalf("member.added events: %+v", added)
	}
	// Each change is also a system entry of the stream (seqs 4 to 10), so
	// member.removed's seq (last_seq before its entry) moves with them.
	removed := outboxEvents(t, pool, conv.ID, chat.EventMemberRemoved)
	wantRemoved := [][3]int64{{newbie, admin, 5}, {bob, bob, 6}, {admin, owner, 7}, {owner, owner, 8}}
	if len(removed) != len(wantRemoved) {
		t.Fatalf("member.removed events: %+v", removed)
	}
	for i, w := range wantRemoved {
		if removed[i].UserID != w[0] || removed[i].ActorID != w[1] || removed[i].Seq != w[2] {
			t.Fatalf("member.removed %d: %+v, want user %d by %d at seq %d", i, removed[i], w[0], w[1], w[2])
		}
	}
	sys := outboxEvents(t, pool, conv.ID, chat.EventSystemNew)
	wantSys := []struct {
		action      chat.SystemAction
		user, actor int64
	}{{chat.SystemMemberAdded, admin, owner}, {chat.SystemMemberAdded, newbie, admin}, {chat.SystemMemberRemoved, newbie, admin},
		{chat.SystemMemberLeft, bob, bob}, {chat.SystemMemberRemoved, admin, owner}, {chat.SystemMemberLeft, owner, owner},
		{chat.SystemOwnerChanged, alice, owner}}
	if len(sys) != len(wantSys) {
		t.Fatalf("system entries: %+v", sys)
	}
	for i, w := range wantSys {
		if e := sys[i]; chat.SystemAction(e.Action) != w.action || e.UserID != w.user || e.ActorID != w.actor || e.Seq != int64(4+i) {
			t.Fatalf("system entry %d: %+v, want %s of %d by %d at seq %d", i, e, w.action, w.user, w.actor, 4+i)
		}
	}
	// The owner left without admins: the longest-standing member (the
	// founders joined together: the lowest id) owns the group.
	if m := member(t, st, conv.ID, alice, alice); m.Role != chat.RoleOwner {
		t.Fatalf("after the owner left, alice is %s, want owner", m.Role)
	}
}

func TestAddMemberCapHoldsUnderConcurrentAdds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStoreWithLimits(t, chat.Limits{MaxMembers: 5})
	_, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "too big", Members: []int64{2, 3, 4, 5, 6}})
	wantCode(t, "create over the cap", err, chat.CodeMemberCap)
	conv := mustGroup(t, st, 1, 2, 3, 4) // one slot left

	const racers = 10
	errs := concurrently(racers, func(i int) error {
		_, _, err := st.AddMember(ctx, conv.ID, 1, int64(100+i), chat.RoleMember)
		return err
	})
	ok, _ := tally(t, "racing add", errs, func(err error) bool { return isCode(err, chat.CodeMemberCap) })
	if ok != 1 {
		t.Fatalf("%d adds won the last slot, want 1", ok)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1`, conv.ID); n != 5 {
		t.Fatalf("%d members, cap is 5", n)
	}
	if evs := outboxEvents(t, pool, conv.ID, chat.EventMemberAdded); len(evs) != 1 {
		t.Fatalf("%d member.added events, want 1 (the racer that won)", len(evs))
	}
	// Leaving frees a slot.
	mustRemove(t, ctx, st, conv.ID, 2, 2, "user 2 leaves")
	if _, _, err := st.AddMember(ctx, conv.ID, 1, 200, chat.RoleMember); err != nil {
		t.Fatalf("add after a leave: %v", err)
	}
}

func TestDirectConversationMembershipCannotChange(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	conv, _, err := st.OpenDirect(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.AddMember(ctx, conv.ID, 1, 3, chat.RoleMember)
	wantCode(t, "add to direct", err, chat.CodeForbidden)
	err = st.RemoveMember(ctx, conv.ID, 1, 2)
	wantCode(t, "remove from direct", err, chat.CodeForbidden)
	err = st.RemoveMember(ctx, conv.ID, 1, 1)
	wantCode(t, "leave direct", err, chat.CodeForbidden)
	if evs := outboxEvents(t, pool, conv.ID, ""); len(evs) != 1 {
		t.Fatalf("events after refused changes: %+v", evs)
	}
	// Both can talk.
	mustSend(t, st, conv.ID, 1, "hi")
	mustSend(t, st, conv.ID, 2, "hello")
}

func TestGetConversationListsMembersWithWatermarks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	conv := mustGroup(t, st, 8, 4, 6)
	mustSend(t, st, conv.ID, 6, "x")
	mustSend(t, st, conv.ID, 6, "y")
	mustMarkRead(t, ctx, st, conv.ID, 4, 1)
	got, err := st.GetConversation(ctx, conv.ID, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != conv.ID || got.LastSeq != 2 || got.LastMessageAt == nil || got.Title != "group" {
		t.Fatalf("conversation %+v", got)
	}
	type mw struct {
		user int64
		role chat.Role
		read int64
	}
	var ms []mw
	for _, m := range got.Members {
		ms = append(ms, mw{m.UserID, m.Role, m.LastReadSeq})
	}
	if want := []mw{{4, chat.RoleMember, 1}, {6, chat.RoleMember, 2}, {8, chat.RoleOwner, 0}}; !slices.Equal(ms, want) {
		t.Fatalf("members %+v, want %+v", ms, want)
	}
}
