package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// Every rule of who may change a group: rename, historyVisible, roles,
// adding an admin, removing, transferring; non-members and unknown groups.
func TestGroupPermissionsForOwnerAdminMemberAndOutsiders(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, admin, admin2, member, other, stranger = 1, 2, 3, 4, 5, 99
	g := mustGroup(t, st, owner, member, other)
	for _, a := range []int64{admin, admin2} {
		if _, _, err := st.AddMember(ctx, g.ID, owner, a, chat.RoleAdmin); err != nil {
			t.Fatalf("owner adds admin %d: %v", a, err)
		}
	}
	events := func() int { return len(outboxEvents(t, pool, g.ID, "")) }
	before := events()

	rename := func(actor int64, title string) error {
		_, err := st.UpdateGroup(ctx, g.ID, actor, chat.GroupUpdate{Title: &title})
		return err
	}
	wantCode(t, "member renames", rename(member, "x"), chat.CodeForbidden)
	wantCode(t, "stranger renames", rename(stranger, "x"), chat.CodeNotMember)
	_, err := st.UpdateGroup(ctx, 4242, owner, chat.GroupUpdate{Title: new("x")})
	wantCode(t, "rename of an unknown group", err, chat.CodeNotFound)
	_, err = st.UpdateGroup(ctx, g.ID, admin, chat.GroupUpdate{HistoryVisible: new(chat.HistoryAll)})
	wantCode(t, "admin changes historyVisible", err, chat.CodeForbidden)
	_, err = st.SetRole(ctx, g.ID, admin, member, chat.RoleAdmin)
	wantCode(t, "admin grants admin", err, chat.CodeForbidden)
	_, err = st.SetRole(ctx, g.ID, member, member, chat.RoleAdmin)
	wantCode(t, "member promotes themself", err, chat.CodeForbidden)
	_, err = st.SetRole(ctx, g.ID, owner, stranger, chat.RoleAdmin)
	wantCode(t, "role of a non-member", err, chat.CodeNotFound)
	_, err = st.SetRole(ctx, g.ID, owner, owner, chat.RoleMember)
	wantCode(t, "owner demotes themself", err, chat.CodeInvalid)
	wantCode(t, "admin transfers", st.TransferOwnership(ctx, g.ID, admin, admin), chat.CodeForbidden)
	wantCode(t, "member transfers", st.TransferOwnership(ctx, g.ID, member, member), chat.CodeForbidden)
	wantCode(t, "transfer to a stranger", st.TransferOwnership(ctx, g.ID, owner, stranger), chat.CodeNotFound)
	wantCode(t, "transfer to oneself", st.TransferOwnership(ctx, g.ID, owner, owner), chat.CodeInvalid)
	_, _, err = st.AddMember(ctx, g.ID, admin, 20, chat.RoleAdmin)
	wantCode(t, "admin adds an admin", err, chat.CodeForbidden)
	_, _, err = st.AddMember(ctx, g.ID, member, 20, chat.RoleMember)
	wantCode(t, "member adds", err, chat.CodeForbidden)
	wantCode(t, "admin removes an admin", st.RemoveMember(ctx, g.ID, admin, admin2), chat.CodeForbidden)
	wantCode(t, "admin removes the owner", st.RemoveMember(ctx, g.ID, admin, owner), chat.CodeForbidden)
	wantCode(t, "member removes a member", st.RemoveMember(ctx, g.ID, member, other), chat.CodeForbidden)
	wantCode(t, "stranger removes", st.RemoveMember(ctx, g.ID, stranger, member), chat.CodeNotMember)
	_, err = st.MembersPage(ctx, g.ID, stranger, 10, "")
	wantCode(t, "stranger lists members", err, chat.CodeNotMember)
	if n := events(); n != before {
		t.Fatalf("refused changes wrote %d events", n-before)
	}
	d, _, err := st.OpenDirect(ctx, owner, member)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.UpdateGroup(ctx, d.ID, owner, chat.GroupUpdate{Title: new("x")})
	wantCode(t, "rename a direct conversation", err, chat.CodeForbidden)

	// What is allowed.
	if err := rename(admin, "Climbing"); err != nil {
		t.Fatalf("admin renames: %v", err)
	}
	if m, err := st.SetRole(ctx, g.ID, owner, member, chat.RoleAdmin); err != nil || m.Role != chat.RoleAdmin {
		t.Fatalf("owner grants admin: %+v, %v", m, err)
	}
	if _, err := st.SetRole(ctx, g.ID, owner, member, chat.RoleMember); err != nil {
		t.Fatalf("owner takes admin back: %v", err)
	}
	mustRemove(t, ctx, st, g.ID, admin, other, "admin removes a member")
	mustRemove(t, ctx, st, g.ID, owner, admin2, "owner removes an admin")
	mustRemove(t, ctx, st, g.ID, member, member, "member leaves")
	mustTransfer(t, ctx, st, g.ID, owner, admin, "owner transfers")
	roles := map[int64]chat.Role{}
	conv, err := st.GetConversation(ctx, g.ID, owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range conv.Members {
		roles[m.UserID] = m.Role
	}
	if want := map[int64]chat.Role{owner: chat.RoleAdmin, admin: chat.RoleOwner}; fmt.Sprint(roles) != fmt.Sprint(want) {
		t.Fatalf("roles after the transfer: %v, want %v", roles, want)
	}
	if conv.Title != "Climbing" {
		t.Fatalf("title %q", conv.Title)
	}
	// The changes are entries of the stream, each once, in order.
	var got []string
	for _, e := range outboxEvents(t, pool, g.ID, chat.EventSystemNew)[2:] {
		got = append(got, fmt.Sprintf("%s %d by %d", e.Action, e.UserID, e.ActorID))
	}
	want := []string{"group.updated 0 by 2", "role.changed 4 by 1", "role.changed 4 by 1", "member.removed 5 by 2",
		"member.removed 3 by 1", "member.left 4 by 4", "owner.changed 2 by 1"}
	if !slices.Equal(got, want) {
		t.Fatalf("system entries\n%q\nwant\n%q", got, want)
	}
	updated := outboxEvents(t, pool, g.ID, chat.EventMemberUpdated)
	if len(updated) != 4 || updated[2].UserID != admin || updated[2].Role != chat.RoleOwner ||
		updated[3].UserID != owner || updated[3].Role != chat.RoleAdmin {
		t.Fatalf("member.updated events: %+v", updated)
	}
}

// Renaming writes a system entry (offline members read it in history) and
// conversation.updated with the settings after it; the same values again
// write nothing.
func TestRenamingAGroupIsAStreamEntryAndAnEvent(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	mustSend(t, st, g.ID, 2, "hi")
	conv, err := st.UpdateGroup(ctx, g.ID, 1, chat.GroupUpdate{Title: new("Trip"), About: new("Plans"),
		AvatarURL: new("https://img.example/trip.png")})
	if err != nil {
		t.Fatal(err)
	}
	if conv.Title != "Trip" || conv.About != "Plans" || conv.Avatar == nil || *conv.Avatar != "https://img.example/trip.png" || conv.LastSeq != 2 {
		t.Fatalf("updated conversation %+v", conv)
	}
	page := mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 2})
	if len(page) != 2 || page[1].Kind != chat.KindSystem || page[1].SenderID != 1 || page[1].System == nil ||
		page[1].System.Action != chat.SystemGroupUpdated || *page[1].System.Title != "Trip" || page[1].Body != "" {
		t.Fatalf("history %+v", page)
	}
	if page[1].System.HistoryVisible != "" {
		t.Fatalf("unchanged historyVisible listed: %+v", page[1].System)
	}
	ev := outboxEvents(t, pool, g.ID, chat.EventConversationUpdated)
	if len(ev) != 1 || *ev[0].Title != "Trip" || *ev[0].About != "Plans" || ev[0].Seq != 2 || ev[0].ActorID != 1 ||
		ev[0].HistoryVisible != chat.HistoryJoined {
		t.Fatalf("conversation.updated %+v", ev)
	}
	before := len(outboxEvents(t, pool, g.ID, ""))
	if _, err := st.UpdateGroup(ctx, g.ID, 1, chat.GroupUpdate{Title: new("Trip")}); err != nil {
		t.Fatal(err)
	}
	if n := len(outboxEvents(t, pool, g.ID, "")); n != before {
		t.Fatalf("renaming to the same title wrote %d events", n-before)
	}
	// Removing the avatar.
	conv, err = st.UpdateGroup(ctx, g.ID, 1, chat.GroupUpdate{AvatarURL: new("")})
	if err != nil || conv.Avatar != nil {
		t.Fatalf("avatar removed: %+v, %v", conv, err)
	}
	// The inbox shows the new title.
	in, err := st.Inbox(ctx, 2, 0, "")
	if err != nil || in.Conversations[0].Title != "Trip" {
		t.Fatalf("inbox %+v, %v", in, err)
	}
}

// When the owner leaves, the longest-standing admin owns the group, else
// the longest-standing member; the last one out archives it.
func TestOwnerLeavingPassesOwnershipToTheLongestStandingAdminElseMember(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner = 1
	g := mustGroup(t, st, owner, 7)
	add := func(u int64, r chat.Role) {
		t.Helper()
		mustAdd(t, ctx, st, g.ID, owner, u, r)
	}
	add(5, chat.RoleAdmin) // the earliest admin
	add(3, chat.RoleMember)
	add(2, chat.RoleAdmin) // a lower id, but later
	role := func(u int64) chat.Role {
		t.Helper()
		for _, m := range mustMembers(t, st, g.ID, u) {
			if m.UserID == u {
				return m.Role
			}
		}
		return ""
	}
	mustRemove(t, ctx, st, g.ID, owner, owner, "owner leaves")
	if r := role(5); r != chat.RoleOwner {
		t.Fatalf("longest-standing admin 5 is %s", r)
	}
	mustRemove(t, ctx, st, g.ID, 5, 5, "user 5 leaves")
	if r := role(2); r != chat.RoleOwner {
		t.Fatalf("remaining admin 2 is %s", r)
	}
	mustRemove(t, ctx, st, g.ID, 2, 2, "user 2 leaves")
	// No admin left: 7 was a founder, 3 came later.
	if r := role(7); r != chat.RoleOwner {
		t.Fatalf("longest-standing member 7 is %s", r)
	}
	for _, u := range []int64{7, 3} {
		mustRemove(t, ctx, st, g.ID, u, u, "a member leaves")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation WHERE id = $1 AND archived_at IS NOT NULL`, g.ID); n != 1 {
		t.Fatal("the group whose last member left is not archived")
	}
	owners := outboxEvents(t, pool, g.ID, chat.EventMemberUpdated)
	// 7 leaving made 3 the owner, the last one out.
	if len(owners) != 4 || owners[0].UserID != 5 || owners[1].UserID != 2 || owners[2].UserID != 7 || owners[3].UserID != 3 {
		t.Fatalf("member.updated on succession: %+v", owners)
	}
}

func mustMembers(t *testing.T, st *store.Store, conv, viewer int64) []chat.Member {
	t.Helper()
	c, err := st.GetConversation(testCtx(t), conv, viewer)
	if err != nil {
		t.Fatalf("get conversation: %v", err)
	}
	return c.Members
}

// The owner and an admin leaving at the same moment: whichever commits
// second decides on what the first left. Run many times over: exactly one
// owner remains, the right one, and the stream holds every entry once.
func TestOwnerAndAdminLeavingAtOnceLeaveExactlyOneRightfulOwner(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const rounds = 20
	for i := range rounds {
		const owner, admin, admin2 = 1, 2, 3
		g := mustGroup(t, st, owner, 10, 11)
		for _, a := range []int64{admin, admin2} {
			mustAdd(t, ctx, st, g.ID, owner, a, chat.RoleAdmin)
		}
		leavers := []int64{owner, admin}
		if i%2 == 1 {
			leavers = []int64{owner, admin, admin2}
		}
		errs := concurrently(len(leavers), func(j int) error {
			return st.RemoveMember(ctx, g.ID, leavers[j], leavers[j])
		})
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %d leaves: %v", i, leavers[j], err)
			}
		}
		ms := mustMembers(t, st, g.ID, 10)
		var owners []int64
		for _, m := range ms {
			if m.Role == chat.RoleOwner {
				owners = append(owners, m.UserID)
			}
		}
		// admin2 stays in even rounds: the only admin left must own it;
		// in odd rounds every admin left: the longest-standing member (10).
		want := int64(admin2)
		if i%2 == 1 {
			want = 10
		}
		if len(owners) != 1 || owners[0] != want {
			t.Fatalf("round %d: owners %v of %+v, want [%d]", i, owners, ms, want)
		}
		n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, g.ID)
		last := queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, g.ID)
		if n != last {
			t.Fatalf("round %d: %d entries, last_seq %d: a gap or a duplicate", i, n, last)
		}
	}
}

// GET members: paged, the owner first, then admins, then members by join
// time, with roles and join times; every member exactly once.
func TestMembersArePagedOwnerFirstThenAdminsThenMembersByJoinTime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	g := mustGroup(t, st, 50, 1, 2, 3)
	for _, u := range []int64{40, 30} {
		mustAdd(t, ctx, st, g.ID, 50, u, chat.RoleAdmin)
	}
	for u := int64(60); u < 67; u++ {
		mustAdd(t, ctx, st, g.ID, 30, u, "")
	}
	var got []int64
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := st.MembersPage(ctx, g.ID, 1, 4, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Members {
			if m.JoinedAt.IsZero() || m.Role == "" {
				t.Fatalf("member without role or join time: %+v", m)
			}
			got = append(got, m.UserID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	want := []int64{50, 40, 30, 1, 2, 3, 60, 61, 62, 63, 64, 65, 66}
	if !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	_, err := st.MembersPage(ctx, g.ID, 1, 4, "bogus")
	wantCode(t, "bad cursor", err, chat.CodeInvalid)
}

// gateTracer holds the first statement of its pool's connections that
// contains match: it says so on arrived and sends it once release closes.
type gateTracer struct {
	match   string
	once    sync.Once
	arrived chan struct{}
	release chan struct{}
}

func (g *gateTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, g.match) {
		g.once.Do(func() {
			close(g.arrived)
			<-g.release
		})
	}
	return ctx
}

func (g *gateTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestJoinTimesFollowTheOrderMembersWereAdded: an add whose transaction
// began first but took the group's lock second (it waited) joins second,
// and its joined_at says so: join times order members as their
// member.added entries do (the members list, the longest-standing member
// who inherits the group), not as their transactions began.
func TestJoinTimesFollowTheOrderMembersWereAdded(t *testing.T) {
	st, pool := newStore(t)
	ctx := testCtx(t)
	g := mustGroup(t, st, 1)
	gate := &gateTracer{match: "FROM conversation WHERE id = $1 FOR UPDATE", arrived: make(chan struct{}), release: make(chan struct{})}
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = gate
	slowPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer slowPool.Close()
	slow := store.New(slowPool, chat.DefaultLimits())
	defer func() { _ = slow.Close(context.Background()) }()

	const first, second = 10, 11 // in order of their adds' commits
	late := make(chan error, 1)
	go func() {
		_, _, err := slow.AddMember(ctx, g.ID, 1, second, chat.RoleMember)
		late <- err
	}()
	select {
	case <-gate.arrived: // its transaction began; its lock is still to take
	case err := <-late:
		t.Fatalf("the gated add returned before its lock: %v", err)
	}
	mustAdd(t, ctx, st, g.ID, 1, first, chat.RoleMember)
	close(gate.release)
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	var order string
	if err := pool.QueryRow(ctx, `
		SELECT string_agg(user_id::text, ' ' ORDER BY joined_at, user_id) FROM conversation_member
		WHERE conversation_id = $1 AND user_id IN ($2, $3)`, g.ID, first, second).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(first, " ", second); order != want {
		t.Errorf("members by joined_at: %s, want %s (the order of their member.added entries)", order, want)
	}
}

// A leave retried after the first one succeeded (its answer lost on a weak
// network) succeeds again and changes nothing: no entry, no event, the
// group still archived. So does a removed member's leave. Someone who
// never was a member is still refused.
func TestARetriedLeaveSucceedsAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, member, removed, stranger = 1, 2, 3, 99
	g := mustGroup(t, st, owner, member, removed)
	mustSend(t, st, g.ID, owner, "hello")
	mustRemove(t, ctx, st, g.ID, member, member, "member leaves")
	mustRemove(t, ctx, st, g.ID, owner, removed, "owner removes")
	state := func() string {
		return fmt.Sprintf("last_seq=%d events=%d", queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, g.ID),
			len(outboxEvents(t, pool, g.ID, "")))
	}
	before := state()
	mustRemove(t, ctx, st, g.ID, member, member, "retried leave")
	mustRemove(t, ctx, st, g.ID, removed, removed, "leave of a removed member")
	if after := state(); after != before {
		t.Fatalf("a retried leave wrote: %s, then %s", before, after)
	}
	wantCode(t, "stranger leaves", st.RemoveMember(ctx, g.ID, stranger, stranger), chat.CodeNotMember)
	wantCode(t, "removed member removes another", st.RemoveMember(ctx, g.ID, removed, owner), chat.CodeNotMember)

	// The last member's leave archives the group; its retry succeeds too.
	mustRemove(t, ctx, st, g.ID, owner, owner, "last member leaves")
	before = state()
	mustRemove(t, ctx, st, g.ID, owner, owner, "retried leave of an archived group")
	if after := state(); after != before {
		t.Fatalf("a retried leave of an archived group wrote: %s, then %s", before, after)
	}
}

// groupState sums up what a group change writes: its last seq (system
// entries) and its outbox events.
func groupState(t *testing.T, pool *pgxpool.Pool, conv int64) string {
	t.Helper()
	return fmt.Sprintf("last_seq=%d events=%d", queryInt(t, pool, `SELECT last_seq FROM conversation WHERE id = $1`, conv),
		len(outboxEvents(t, pool, conv, "")))
}

// writesNothing runs do, which must leave the group's stream as it was:
// no seq taken, no event written.
func writesNothing(t *testing.T, pool *pgxpool.Pool, conv int64, what string, do func()) {
	t.Helper()
	before := groupState(t, pool, conv)
	do()
	if after := groupState(t, pool, conv); after != before {
		t.Fatalf("%s wrote: %s, then %s", what, before, after)
	}
}

// A removal repeated by whoever made it (its answer lost on a weak
// network) succeeds again and writes nothing, for a plain member removed
// by an admin as for an admin removed by the owner. Anyone else asking to
// remove someone no longer there learns nothing more than before: a user
// removed by another, one who left, one who never was a member are
// not_found; a plain member is forbidden whoever the target.
func TestARetriedRemoveOfAMemberSucceedsAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, admin, admin2, member, leaver, plain, stranger = 1, 2, 3, 4, 5, 6, 99
	g := mustGroup(t, st, owner, member, leaver, plain)
	for _, a := range []int64{admin, admin2} {
		if _, _, err := st.AddMember(ctx, g.ID, owner, a, chat.RoleAdmin); err != nil {
			t.Fatalf("owner adds admin %d: %v", a, err)
		}
	}
	mustRemove(t, ctx, st, g.ID, admin, member, "admin removes a member")
	mustRemove(t, ctx, st, g.ID, owner, admin2, "owner removes an admin")
	mustRemove(t, ctx, st, g.ID, leaver, leaver, "member leaves")
	writesNothing(t, pool, g.ID, "a retried removal", func() {
		mustRemove(t, ctx, st, g.ID, admin, member, "admin's retried removal")
		mustRemove(t, ctx, st, g.ID, owner, admin2, "owner's retried removal of an admin")
	})
	wantCode(t, "owner removes whom the admin removed", st.RemoveMember(ctx, g.ID, owner, member), chat.CodeNotFound)
	wantCode(t, "admin removes whom the owner removed", st.RemoveMember(ctx, g.ID, admin, admin2), chat.CodeNotFound)
	wantCode(t, "owner removes who left", st.RemoveMember(ctx, g.ID, owner, leaver), chat.CodeNotFound)
	wantCode(t, "owner removes a stranger", st.RemoveMember(ctx, g.ID, owner, stranger), chat.CodeNotFound)
	wantCode(t, "plain member removes a removed member", st.RemoveMember(ctx, g.ID, plain, member), chat.CodeForbidden)

	// Added back and removed by another, the member's last removal is not
	// the admin's: the admin's old removal no longer answers for it.
	if _, _, err := st.AddMember(ctx, g.ID, owner, member, chat.RoleMember); err != nil {
		t.Fatalf("owner adds the member back: %v", err)
	}
	mustRemove(t, ctx, st, g.ID, owner, member, "owner removes the member again")
	wantCode(t, "admin removes whom the owner removed last", st.RemoveMember(ctx, g.ID, admin, member), chat.CodeNotFound)
	mustRemove(t, ctx, st, g.ID, owner, member, "owner's retried second removal")
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1`, g.ID); n != 3 {
		t.Fatalf("members: %d, want the owner, the admin and the plain member", n)
	}
}

// A removal answered 204 as a retry only while the admin is the member
// who made it: one who left after it and was added back is a new member,
// who removed nobody, and their removal of someone not in the group is
// answered as any admin's (404), as a transfer's is: an old request's
// answer is not given to a membership that never made it.
func TestARemovalRetriedAfterLeavingAndComingBackIsNoRetry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, admin, member = 1, 2, 3
	g := mustGroup(t, st, owner, member)
	mustAdd(t, ctx, st, g.ID, owner, admin, chat.RoleAdmin)
	mustRemove(t, ctx, st, g.ID, admin, member, "the admin removes a member")
	mustRemove(t, ctx, st, g.ID, admin, admin, "the admin leaves")
	mustAdd(t, ctx, st, g.ID, owner, admin, chat.RoleAdmin)
	writesNothing(t, pool, g.ID, "a refused removal", func() {
		wantCode(t, "the returned admin repeats the removal", st.RemoveMember(ctx, g.ID, admin, member), chat.CodeNotFound)
	})
}

// A transfer repeated by the previous owner (its answer lost) succeeds
// and writes nothing while the one they made owner still is. Anyone else,
// or the previous owner once the group changed hands again, is forbidden.
func TestARetriedOwnershipTransferSucceedsAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, heir, plain = 1, 2, 3
	g := mustGroup(t, st, owner, heir, plain)
	mustTransfer(t, ctx, st, g.ID, owner, heir, "transfer")
	writesNothing(t, pool, g.ID, "a retried transfer", func() {
		mustTransfer(t, ctx, st, g.ID, owner, heir, "retried transfer")
	})
	if m := member(t, st, g.ID, heir, owner); m.Role != chat.RoleAdmin {
		t.Fatalf("previous owner's role after the retry: %s, want admin", m.Role)
	}
	wantCode(t, "previous owner transfers to another", st.TransferOwnership(ctx, g.ID, owner, plain), chat.CodeForbidden)
	wantCode(t, "plain member names the owner", st.TransferOwnership(ctx, g.ID, plain, heir), chat.CodeForbidden)

	// The group changes hands and comes back: the heir owns it by the
	// plain member's transfer now, not by the first owner's.
	mustTransfer(t, ctx, st, g.ID, heir, plain, "second transfer")
	mustTransfer(t, ctx, st, g.ID, plain, heir, "transfer back")
	wantCode(t, "a stale retry of the first transfer", st.TransferOwnership(ctx, g.ID, owner, heir), chat.CodeForbidden)
}

// An owner who left handed the group to a successor, but transferred
// nothing: added back, their transfer to that successor is no retry of
// one of theirs, and is refused as any member's.
func TestAnOwnerWhoLeftAndCameBackCannotPassATransferAsARetry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, heir = 1, 2
	g := mustGroup(t, st, owner, heir)
	mustRemove(t, ctx, st, g.ID, owner, owner, "the owner leaves")
	if m := member(t, st, g.ID, heir, heir); m.Role != chat.RoleOwner {
		t.Fatalf("heir's role after the owner left: %s, want owner", m.Role)
	}
	mustAdd(t, ctx, st, g.ID, heir, owner, chat.RoleMember)
	writesNothing(t, pool, g.ID, "a refused transfer", func() {
		wantCode(t, "the returned owner transfers to the heir", st.TransferOwnership(ctx, g.ID, owner, heir), chat.CodeForbidden)
	})
}

// A transfer answered 204 as a retry only while the previous owner is
// the member who made it: one who left after it and was added back is a
// new member, who transferred nothing, and their transfer is refused as
// any member's.
func TestATransferRetriedAfterLeavingAndComingBackIsNoRetry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, heir = 1, 2
	g := mustGroup(t, st, owner, heir)
	mustTransfer(t, ctx, st, g.ID, owner, heir, "transfer")
	mustRemove(t, ctx, st, g.ID, owner, owner, "the previous owner leaves")
	mustAdd(t, ctx, st, g.ID, heir, owner, chat.RoleMember)
	writesNothing(t, pool, g.ID, "a refused transfer", func() {
		wantCode(t, "the returned previous owner repeats the transfer", st.TransferOwnership(ctx, g.ID, owner, heir), chat.CodeForbidden)
	})
}

// The database itself keeps a group to one owner (migration 0044, a
// unique index over the owner rows): a second owner written by any path,
// SQL included, is refused. Two transfers racing from one owner to two
// members leave exactly one owner, the one the first to commit named,
// and the transfer itself, which demotes and promotes in one transaction,
// passes the index.
func TestTheDatabaseKeepsAGroupToOneOwner(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, a, b = 1, 2, 3
	g := mustGroup(t, st, owner, a, b)
	_, err := pool.Exec(ctx, `UPDATE conversation_member SET role = 'owner' WHERE conversation_id = $1 AND user_id = $2`, g.ID, a)
	if err == nil || !strings.Contains(err.Error(), "23505") {
		t.Fatalf("a second owner written by SQL: %v, want a unique violation (23505)", err)
	}
	for round := range 10 {
		g := mustGroup(t, st, owner, a, b)
		errs := concurrently(2, func(i int) error { return st.TransferOwnership(ctx, g.ID, owner, []int64{a, b}[i]) })
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case chat.ErrorCode(err) == chat.CodeForbidden:
			default:
				t.Fatalf("round %d: transfer to %d: %v", round, []int64{a, b}[i], err)
			}
		}
		if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND role = 'owner'`, g.ID); n != 1 || won != 1 {
			t.Fatalf("round %d: %d owners after %d transfers succeeded, want 1 and 1", round, n, won)
		}
	}
}

// The store keeps one owner per group whoever calls it: a role change
// to owner is refused (ownership moves with TransferOwnership), as an
// add as owner is.
func TestARoleChangeToOwnerIsRefusedAndLeavesOneOwner(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const owner, plain = 1, 2
	g := mustGroup(t, st, owner, plain)
	writesNothing(t, pool, g.ID, "a refused role change", func() {
		_, err := st.SetRole(ctx, g.ID, owner, plain, chat.RoleOwner)
		wantCode(t, "the owner makes a member owner", err, chat.CodeInvalid)
	})
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND role = 'owner'`, g.ID); n != 1 {
		t.Fatalf("owners: %d, want 1", n)
	}
}
