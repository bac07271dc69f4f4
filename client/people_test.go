package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// The people and group operations of the Go client, end to end: profiles,
// a group's settings and roles, search; system entries arrive as events in
// seq order, between messages, and a View stays in step.
func TestPeopleAndGroupOperationsOfTheGoClient(t *testing.T) {
	t.Parallel()
	broker := newBroker(t)
	a := connect(t, testConfig(t, broker, 1))
	b := connect(t, testConfig(t, broker, 2))
	ctx := ctxFor(t, 30*time.Second)

	p, err := a.SetProfile(ctx, client.ProfileUpdate{DisplayName: "Ann", About: new("hello")})
	if err != nil || p.DisplayName != "Ann" {
		t.Fatalf("SetProfile: %+v, %v", p, err)
	}
	if _, err := b.User(ctx, 1); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a stranger's profile: %v", err)
	}
	g, err := a.CreateGroup(ctx, "g", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = b.User(ctx, 1); err != nil || p.DisplayName != "Ann" || p.About != "hello" {
		t.Fatalf("User: %+v, %v", p, err)
	}
	if us, err := b.Users(ctx, []int64{1, 2, 77}); err != nil || len(us) != 2 {
		t.Fatalf("Users: %+v, %v", us, err)
	}
	if _, err := a.Send(ctx, g.ID, "before the rename"); err != nil {
		t.Fatal(err)
	}
	conv, err := a.UpdateGroup(ctx, g.ID, client.GroupUpdate{Title: new("Renamed"), HistoryVisible: new("all")})
	if err != nil || conv.Title != "Renamed" || conv.HistoryVisible != "all" {
		t.Fatalf("UpdateGroup: %+v, %v", conv, err)
	}
	if _, err := b.UpdateGroup(ctx, g.ID, client.GroupUpdate{Title: new("mine")}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("member renames: %v", err)
	}
	if m, err := a.SetRole(ctx, g.ID, 2, "admin"); err != nil || m.Role != "admin" {
		t.Fatalf("SetRole: %+v, %v", m, err)
	}
	if _, err := a.Send(ctx, g.ID, "after the changes"); err != nil {
		t.Fatal(err)
	}
	// b sees seq 1 (message), 2 (rename), 3 (role), 4 (message) in order.
	view := client.NewView(2)
	var types []string
	if !watchEvents(t, b, 15*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != g.ID || (ev.Type != client.EventMessageNew && ev.Type != client.EventSystemNew) {
			return false
		}
		if ev.Seq != int64(len(types)+1) {
			t.Fatalf("entry %d has seq %d (%s)", len(types)+1, ev.Seq, ev.Type)
		}
		view.Apply(ev)
		types = append(types, ev.Type+":"+ev.Action)
		return len(types) == 4
	}) {
		t.Fatalf("entries so far %v", types)
	}
	if types[1] != "system.new:group.updated" || types[2] != "system.new:role.changed" {
		t.Fatalf("entries %v", types)
	}
	if view.Position(g.ID) != 4 || len(view.Messages(g.ID)) != 2 {
		t.Fatalf("view at %d with %d messages", view.Position(g.ID), len(view.Messages(g.ID)))
	}
	hist, err := b.History(ctx, g.ID, client.HistoryOptions{})
	if err != nil || len(hist) != 4 || hist[1].Kind != client.KindSystem || hist[1].Action != "group.updated" || hist[1].Title != "Renamed" ||
		hist[2].UserID != 2 || hist[2].Role != "admin" || hist[2].ActorID != 1 {
		t.Fatalf("history %+v, %v", hist, err)
	}
	fromHistory := client.NewView(2)
	fromHistory.ApplyHistory(hist)
	if fromHistory.Position(g.ID) != 4 || len(fromHistory.Messages(g.ID)) != 2 {
		t.Fatal("a view from history differs from the view from events")
	}
	page, err := b.Search(ctx, "changes", client.SearchOptions{})
	if err != nil || len(page.Results) != 1 || page.Results[0].Seq != 4 {
		t.Fatalf("Search: %+v, %v", page, err)
	}
	ms, err := b.Members(ctx, g.ID, 10, "")
	if err != nil || len(ms.Members) != 2 || ms.Members[0].Role != "owner" {
		t.Fatalf("Members: %+v, %v", ms, err)
	}
	if err := a.TransferOwnership(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	st, err := b.SetSettings(ctx, client.SettingsUpdate{Presence: new(bool)})
	if err != nil || st.Presence || !st.ReadReceipts {
		t.Fatalf("SetSettings: %+v, %v", st, err)
	}
	d, _, err := a.OpenDirect(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Block(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, d.ID, "are you there?"); !errors.Is(err, client.ErrBlocked) {
		t.Fatalf("send to a blocker: %v", err)
	}
	if bl, err := b.Blocks(ctx); err != nil || len(bl) != 1 || bl[0].UserID != 1 {
		t.Fatalf("Blocks: %+v, %v", bl, err)
	}
	if err := b.Unblock(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// TestUsersAnswersMoreIdsThanOneRequestTakes: Users sent every id in one
// request, and chatd refuses more than 100 ("invalid"): asking for a
// group's 250 members failed. It answers all of them now, in the order
// asked, a repeated id once, strangers left out.
func TestUsersAnswersMoreIdsThanOneRequestTakes(t *testing.T) {
	t.Parallel()
	broker := newBroker(t)
	a := connect(t, testConfig(t, broker, 1))
	ctx := ctxFor(t, 30*time.Second)
	var members []int64
	for id := int64(2); id <= 250; id++ {
		members = append(members, id)
	}
	if _, err := a.CreateGroup(ctx, "big", members); err != nil {
		t.Fatal(err)
	}
	var ask, want []int64
	for id := int64(250); id >= 1; id-- {
		ask = append(ask, id)
		want = append(want, id)
		if id == 120 {
			ask = append(ask, 9999, 250) // a stranger, a repeat
		}
	}
	us, err := a.Users(ctx, ask)
	if err != nil {
		t.Fatalf("Users of %d ids: %v", len(ask), err)
	}
	got := make([]int64, len(us))
	for i, u := range us {
		got[i] = u.ID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Users answered %d profiles %v, want %d %v", len(got), got, len(want), want)
	}
}
