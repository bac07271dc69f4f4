package store_test

import (
	"slices"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// Profiles are visible to the user and to who shares a conversation with
// them, nobody else (left out as if they did not exist); profile.updated
// goes to the same people, but not through large groups.
func TestProfilesAreSeenByWhoSharesAConversationAndUpdatesReachThem(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventProfileUpdated}}
	st, pool := newStoreRecording(t, rec)
	mustGroup(t, st, 1, 2)
	if _, _, err := st.OpenDirect(ctx, 1, 3); err != nil {
		t.Fatal(err)
	}
	big := mustGroup(t, st, 1, 4, 5) // "large" below: 3 members > 2
	_ = big
	p, err := st.SetProfile(ctx, 1, chat.ProfileUpdate{DisplayName: "Ann", About: new("hi"), AvatarURL: new("https://a.example/ann.png")}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.DisplayName != "Ann" || p.About != "hi" || p.Avatar == nil || p.UpdatedAt == nil {
		t.Fatalf("stored %+v", p)
	}
	evs := rec.events()
	if len(evs) != 1 || !slices.Equal(evs[0].To, []int64{1, 2, 3}) || *evs[0].DisplayName != "Ann" {
		t.Fatalf("profile.updated %+v (want to 1, 2 and 3: the group of 3 is large here)", evs)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM outbox WHERE type = 'profile.updated'`); n != 1 {
		t.Fatalf("%d profile.updated outbox rows", n)
	}
	// Unchanged: nothing new. The avatar and about stay when not given.
	if p, err = st.SetProfile(ctx, 1, chat.ProfileUpdate{DisplayName: "Ann"}, 2); err != nil || p.About != "hi" || p.Avatar == nil {
		t.Fatalf("same name again: %+v, %v", p, err)
	}
	if n := len(rec.events()); n != 1 {
		t.Fatalf("an unchanged profile published %d events", n-1)
	}
	for viewer, want := range map[int64][]int64{1: {1, 2, 3, 4}, 2: {1, 2}, 3: {1, 3}, 4: {1, 4}, 9: {9}} {
		ps, err := st.Profiles(ctx, viewer, []int64{3, 1, 2, 4, 9})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, p := range ps {
			ids = append(ids, p.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Errorf("viewer %d sees %v, want %v", viewer, ids, want)
		}
	}
	ps, _ := st.Profiles(ctx, 2, []int64{2})
	if len(ps) != 1 || ps[0].DisplayName != "" || ps[0].Avatar != nil {
		t.Fatalf("a user without a profile: %+v", ps)
	}
}

// Read receipts off: no read.updated reaches others (the event is the
// reader's own), the reader is not counted in seen-by nor in readSeq, and
// reciprocally the reader sees nobody's read state.
func TestReadReceiptsOffHideTheReaderAndHideOthersFromTheReader(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventReadUpdated}}
	st, _ := newStoreRecording(t, rec)
	const alice, bob, carol = 1, 2, 3
	g := mustGroup(t, st, alice, bob, carol)
	m := mustSend(t, st, g.ID, alice, "did you read this?")
	if _, err := st.SetSettings(ctx, bob, chat.SettingsUpdate{ReadReceipts: new(false)}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []int64{bob, carol} {
		mustMarkRead(t, ctx, st, g.ID, u, m.Seq)
	}
	evs := rec.events()
	if len(evs) != 2 || evs[0].UserID != bob || !evs[0].Private || evs[1].UserID != carol || evs[1].Private ||
		!slices.Equal(evs[1].Except, []int64{bob}) {
		t.Fatalf("read.updated events %+v: bob's must be private, carol's must skip bob", evs)
	}
	seen, err := st.SeenBy(ctx, g.ID, alice, m.Seq)
	if err != nil || seen.SeenBy != 1 || seen.Members != 2 || seen.Hidden {
		t.Fatalf("alice's seen-by %+v, %v: want 1 of 2 (carol; bob hides)", seen, err)
	}
	// Reciprocity: bob sees nobody's read state.
	mb := mustSend(t, st, g.ID, bob, "and mine?")
	mustMarkRead(t, ctx, st, g.ID, carol, mb.Seq)
	mustMarkRead(t, ctx, st, g.ID, alice, mb.Seq)
	seen, err = st.SeenBy(ctx, g.ID, bob, mb.Seq)
	if err != nil || seen.SeenBy != 0 || !seen.Hidden {
		t.Fatalf("bob's seen-by %+v, %v: want hidden", seen, err)
	}
	page, err := st.HistoryPage(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: bob})
	if err != nil || page.ReadSeq != 0 {
		t.Fatalf("bob's readSeq %d, %v: want 0", page.ReadSeq, err)
	}
	for _, mm := range mustMembers(t, st, g.ID, bob) {
		if mm.UserID != bob && mm.LastReadSeq != 0 {
			t.Fatalf("bob sees %d's lastReadSeq %d", mm.UserID, mm.LastReadSeq)
		}
	}
	in, err := st.Inbox(ctx, bob, 0, "")
	if err != nil || in.Conversations[0].ReadSeq != 0 {
		t.Fatalf("bob's inbox readSeq: %+v, %v", in, err)
	}
	// Others see bob as having read nothing, while bob's own counts work.
	for _, mm := range mustMembers(t, st, g.ID, alice) {
		if mm.UserID == bob && mm.LastReadSeq != 0 {
			t.Fatalf("alice sees bob's lastReadSeq %d", mm.LastReadSeq)
		}
		if mm.UserID == carol && mm.LastReadSeq != mb.Seq {
			t.Fatalf("alice sees carol's lastReadSeq %d, want %d", mm.LastReadSeq, mb.Seq)
		}
	}
	page, err = st.HistoryPage(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: alice})
	if err != nil || page.ReadSeq != 0 {
		t.Fatalf("alice's readSeq %d, %v: bob counts as unread", page.ReadSeq, err)
	}
	in, err = st.Inbox(ctx, bob, 0, "")
	if err != nil || in.Conversations[0].LastReadSeq != mb.Seq || in.Conversations[0].Unread != 0 {
		t.Fatalf("bob's own watermark: %+v, %v", in.Conversations[0], err)
	}
	// Turned back on: counted again.
	if _, err := st.SetSettings(ctx, bob, chat.SettingsUpdate{ReadReceipts: new(true)}); err != nil {
		t.Fatal(err)
	}
	if seen, err = st.SeenBy(ctx, g.ID, alice, m.Seq); err != nil || seen.SeenBy != 2 {
		t.Fatalf("after bob turned receipts on: %+v, %v", seen, err)
	}
}

// The receipt batches (what chatd runs) mark events the same way.
func TestReadReceiptBatchesKeepReadReceiptsPrivate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventReadUpdated}}
	st, _ := newStoreRecording(t, rec)
	g := mustGroup(t, st, 1, 2, 3)
	m := mustSend(t, st, g.ID, 1, "x")
	if _, err := st.SetSettings(ctx, 3, chat.SettingsUpdate{ReadReceipts: new(false)}); err != nil {
		t.Fatal(err)
	}
	r := newReceipts(t, st, store.ReceiptsConfig{})
	for _, u := range []int64{2, 3} {
		if _, err := r.MarkRead(ctx, g.ID, u, m.Seq); err != nil {
			t.Fatal(err)
		}
	}
	// The batch publishes after its commit, maybe after MarkRead returned.
	evs := rec.events()
	for deadline := time.Now().Add(10 * time.Second); len(evs) < 2 && time.Now().Before(deadline); evs = rec.events() {
		time.Sleep(10 * time.Millisecond)
	}
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	for _, ev := range evs {
		switch ev.UserID {
		case 2:
			if ev.Private || !slices.Equal(ev.Except, []int64{3}) {
				t.Fatalf("2's read.updated %+v", ev)
			}
		case 3:
			if !ev.Private {
				t.Fatalf("3's read.updated %+v", ev)
			}
		}
	}
}

// A blocked user cannot open a direct conversation with the blocker nor
// write into theirs; the blocker can; groups are not affected; recalls are.
func TestABlockedUserCannotOpenOrWriteToTheBlockersDirectConversation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	const blocker, blocked = 1, 2
	d, _, err := st.OpenDirect(ctx, blocker, blocked)
	if err != nil {
		t.Fatal(err)
	}
	old := mustSend(t, st, d.ID, blocked, "before the block")
	g := mustGroup(t, st, blocker, blocked)
	if err := st.Block(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Block(ctx, blocker, blocked, 100); err != nil {
		t.Fatalf("blocking twice: %v", err)
	}
	_, _, err = st.OpenDirect(ctx, blocked, blocker)
	wantCode(t, "blocked opens the direct conversation", err, chat.CodeBlocked)
	_, _, err = st.OpenDirect(ctx, blocked, 77) // others are fine
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Send(ctx, sendReq(d.ID, blocked, "let me talk"))
	wantCode(t, "blocked sends", err, chat.CodeBlocked)
	_, err = st.Change(ctx, edit(d.ID, blocked, old.Seq, "edited"))
	wantCode(t, "blocked edits", err, chat.CodeBlocked)
	_, err = st.Change(ctx, react(d.ID, blocked, old.Seq, "👍", true))
	wantCode(t, "blocked reacts", err, chat.CodeBlocked)
	if _, err := st.Change(ctx, change(chat.KindRecall, d.ID, blocked, old.Seq)); err != nil {
		t.Fatalf("the blocked user takes their message back: %v", err)
	}
	mustSend(t, st, d.ID, blocker, "the blocker still can")
	mustSend(t, st, g.ID, blocked, "groups are not affected")
	if ids, err := st.BlockedBy(ctx, blocked, []int64{blocker, 5}); err != nil || !slices.Equal(ids, []int64{blocker}) {
		t.Fatalf("BlockedBy = %v, %v", ids, err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND sender_id = $2 AND kind = 'message'`, d.ID, blocked); n != 1 {
		t.Fatalf("%d messages of the blocked user in the direct conversation", n)
	}
	bs, err := st.Blocks(ctx, blocker)
	if err != nil || len(bs) != 1 || bs[0].UserID != blocked {
		t.Fatalf("blocks %+v, %v", bs, err)
	}
	if err := st.Unblock(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	mustSend(t, st, d.ID, blocked, "unblocked")
	if _, _, err := st.OpenDirect(ctx, blocked, blocker); err != nil {
		t.Fatalf("open after unblock: %v", err)
	}
}

// Presence off hides a user's presence both ways; a block hides the
// blocker's presence from the blocked.
func TestPresenceVisibilityFollowsSettingsBothWaysAndBlocks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	vis := func(viewer, subject int64) bool {
		t.Helper()
		ok, err := st.PresenceVisible(ctx, viewer, subject)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !vis(1, 2) || !vis(2, 1) {
		t.Fatal("presence hidden by default")
	}
	if _, err := st.SetSettings(ctx, 1, chat.SettingsUpdate{Presence: new(false)}); err != nil {
		t.Fatal(err)
	}
	if vis(2, 1) || vis(1, 2) {
		t.Fatal("presence off must hide 1 from 2 and 2 from 1")
	}
	if _, err := st.SetSettings(ctx, 1, chat.SettingsUpdate{Presence: new(true)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Block(ctx, 3, 4, 100); err != nil {
		t.Fatal(err)
	}
	if vis(4, 3) || !vis(3, 4) {
		t.Fatal("a block hides the blocker from the blocked, not the other way")
	}
	s, err := st.Settings(ctx, 1)
	if err != nil || !s.Presence || !s.ReadReceipts {
		t.Fatalf("settings %+v, %v", s, err)
	}
}

// Presence events go to who shares a small conversation with the user
// and may see their presence (Watchers); HiddenFrom is the rest of them:
// those the user hides from (presence off, or blocked), who must be told
// so. Who hides their own presence is in neither: they see nobody's.
func TestPresenceAudienceSplitsWhoSeesFromWhoIsHiddenFrom(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	mustGroup(t, st, 1, 2, 3, 4)
	mustGroup(t, st, 1, 5, 6, 7, 8) // five members: above the bound of 4
	pr := store.NewPresence(pool, time.Minute)
	audiences := func() (seeing, hidden []int64) {
		t.Helper()
		w, err := pr.Watchers(ctx, []int64{1}, 4)
		if err != nil {
			t.Fatal(err)
		}
		h, err := pr.HiddenFrom(ctx, []int64{1}, 4)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(w[1])
		slices.Sort(h[1])
		return w[1], h[1]
	}
	check := func(what string, seeing, hidden []int64) {
		t.Helper()
		if w, h := audiences(); !slices.Equal(w, seeing) || !slices.Equal(h, hidden) {
			t.Fatalf("%s: watchers %v, hidden from %v; want %v and %v", what, w, h, seeing, hidden)
		}
	}
	check("by default", []int64{2, 3, 4}, nil)
	if _, err := st.SetSettings(ctx, 4, chat.SettingsUpdate{Presence: new(false)}); err != nil {
		t.Fatal(err)
	}
	check("4 hides their own", []int64{2, 3}, nil)
	if err := st.Block(ctx, 1, 3, 100); err != nil {
		t.Fatal(err)
	}
	check("1 blocked 3", []int64{2}, []int64{3})
	if _, err := st.SetSettings(ctx, 1, chat.SettingsUpdate{Presence: new(false)}); err != nil {
		t.Fatal(err)
	}
	check("1 hides theirs", nil, []int64{2, 3})
}

// A reader whose read receipts are off is not seen reading through the
// delivered watermark either: reading (a single receipt or a receipt
// batch) leaves the delivered watermark others see where their sessions'
// acknowledgements put it, and those still move it.
func TestAHiddenReadersReadingDoesNotMoveTheDeliveredWatermarkOthersSee(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	const alice, bob, carol = 1, 2, 3
	g := mustGroup(t, st, alice, bob, carol)
	m1 := mustSend(t, st, g.ID, alice, "one")
	m2 := mustSend(t, st, g.ID, alice, "two")
	if _, err := st.SetSettings(ctx, bob, chat.SettingsUpdate{ReadReceipts: new(false)}); err != nil {
		t.Fatal(err)
	}
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: time.Millisecond})
	mustMarkRead(t, ctx, st, g.ID, carol, m2.Seq)
	mustMarkRead(t, ctx, st, g.ID, bob, m1.Seq)
	if _, err := r.MarkRead(ctx, g.ID, bob, m2.Seq); err != nil {
		t.Fatal(err)
	}
	if got := member(t, st, g.ID, bob, bob).LastReadSeq; got != m2.Seq {
		t.Fatalf("bob's own read watermark %d, want %d", got, m2.Seq)
	}
	shows := func(what string, want int64) {
		t.Helper()
		if d := member(t, st, g.ID, alice, bob).LastDeliveredSeq; d != want {
			t.Fatalf("%s: alice sees bob's lastDeliveredSeq %d, want %d", what, d, want)
		}
		seen, err := st.SeenBy(ctx, g.ID, alice, m1.Seq)
		if wantTo := map[bool]int{true: 2, false: 1}[want >= m1.Seq]; err != nil || seen.DeliveredTo != wantTo {
			t.Fatalf("%s: seen-by %+v, %v; want deliveredTo %d", what, seen, err, wantTo)
		}
		page, err := st.HistoryPage(ctx, chat.HistoryQuery{ConversationID: g.ID, UserID: alice})
		if err != nil || page.DeliveredSeq != want {
			t.Fatalf("%s: alice's deliveredSeq %d, %v; want %d", what, page.DeliveredSeq, err, want)
		}
		in, err := st.Inbox(ctx, alice, 0, "")
		if err != nil || in.Conversations[0].DeliveredSeq != want {
			t.Fatalf("%s: alice's inbox %+v, %v; want deliveredSeq %d", what, in.Conversations, err, want)
		}
	}
	shows("after bob read both", 0)
	r.Delivered(g.ID, bob, m1.Seq)
	waitFor(t, "bob's session's ack", func() bool { return member(t, st, g.ID, alice, bob).LastDeliveredSeq == m1.Seq })
	shows("after bob's session acknowledged the first", m1.Seq)
}

// Every reply that carries a member masks its read watermark as the
// conversation's members do: a role change, and adding someone who is a
// member already.
func TestRepliesCarryingAMemberHideAHiddenReadersWatermark(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	const alice, bob = 1, 2
	g := mustGroup(t, st, alice, bob)
	m := mustSend(t, st, g.ID, alice, "read me")
	if _, err := st.SetSettings(ctx, bob, chat.SettingsUpdate{ReadReceipts: new(false)}); err != nil {
		t.Fatal(err)
	}
	mustMarkRead(t, ctx, st, g.ID, bob, m.Seq)
	if got := member(t, st, g.ID, alice, bob).LastReadSeq; got != 0 {
		t.Fatalf("the conversation shows bob's lastReadSeq %d", got)
	}
	again, created, err := st.AddMember(ctx, g.ID, alice, bob, "")
	if err != nil || created || again.LastReadSeq != 0 {
		t.Fatalf("adding bob again: %+v (created %v), %v; want lastReadSeq 0", again, created, err)
	}
	promoted, err := st.SetRole(ctx, g.ID, alice, bob, chat.RoleAdmin)
	if err != nil || promoted.Role != chat.RoleAdmin || promoted.LastReadSeq != 0 {
		t.Fatalf("promoting bob: %+v, %v; want an admin with lastReadSeq 0", promoted, err)
	}
	same, err := st.SetRole(ctx, g.ID, alice, bob, chat.RoleAdmin)
	if err != nil || same.LastReadSeq != 0 {
		t.Fatalf("promoting bob again: %+v, %v; want lastReadSeq 0", same, err)
	}
}
