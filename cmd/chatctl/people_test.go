package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// The people and group commands against a local chatd: profiles, settings,
// blocks, group administration and search, each printing what a person
// reads (and --json for scripts).
func TestProfileSettingsBlockGroupAndSearchCommands(t *testing.T) {
	srv, env := startChatdEnv(t)
	has := func(r result, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(r.stdout, s) {
				t.Fatalf("output lacks %q:\n%s", s, r.stdout)
			}
		}
	}
	r := mustOK(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann Lee", "--about", "climbs"))
	has(r, "user 1: Ann Lee", "about: climbs", "read receipts on, presence on")
	wantFail(t, chatctl(t, env, "profile", "--user", "1", "--about", "x"), 2, "--name")

	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "hello"))
	r = mustOK(t, chatctl(t, env, "profile", "--user", "2", "--of", "1,3"))
	has(r, "user 1: Ann Lee", "(1 of 2 users share no conversation")

	r = mustOK(t, chatctl(t, env, "settings", "--user", "2", "--read-receipts", "off"))
	has(r, "user 2: read receipts off, presence on")
	wantFail(t, chatctl(t, env, "settings", "--user", "2", "--presence", "maybe"), 2, "on or off")

	r = mustOK(t, chatctl(t, env, "block", "--user", "2", "--peer", "1"))
	has(r, "user 2 blocks user 1")
	r = chatctl(t, env, "send", "--user", "1", "--conversation", "1", "--body", "are you there?")
	if r.code == 0 {
		t.Fatalf("a blocked user's send succeeded: %s", r.stdout)
	}
	r = mustOK(t, chatctl(t, env, "block", "--user", "2", "--peer", "1", "--remove"))
	has(r, "user 2 blocks nobody")

	g, err := srv.Service.CreateGroup(context.Background(), 1, "Team", []int64{2, 3})
	if err != nil || g.ID != 2 || g.HistoryVisible != "joined" {
		t.Fatalf("create group: %+v, %v", g, err)
	}
	r = mustOK(t, chatctl(t, env, "group", "update", "--user", "1", "--conversation", "2", "--title", "Crag crew", "--history", "all"))
	has(r, `"title": "Crag crew"`, `"historyVisible": "all"`)
	r = chatctl(t, env, "group", "update", "--user", "3", "--conversation", "2", "--title", "mine")
	wantFail(t, r, 1, "does not allow this")
	mustOK(t, chatctl(t, env, "group", "role", "--user", "1", "--conversation", "2", "--member", "2", "--role", "admin"))
	mustOK(t, chatctl(t, env, "group", "add", "--user", "2", "--conversation", "2", "--member", "4"))
	r = mustOK(t, chatctl(t, env, "group", "owner", "--user", "1", "--conversation", "2", "--member", "2"))
	has(r, "user 2 owns conversation 2 now")
	r = mustOK(t, chatctl(t, env, "group", "members", "--user", "3", "--conversation", "2"))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "2 ") || !strings.Contains(lines[1], "owner") || !strings.Contains(lines[2], "admin") {
		t.Fatalf("members:\n%s", r.stdout)
	}
	r = mustOK(t, chatctl(t, env, "group", "remove", "--user", "3", "--conversation", "2", "--member", "3"))
	has(r, "user 3 left conversation 2")
	r = mustOK(t, chatctl(t, env, "history", "--user", "1", "--conversation", "2"))
	has(r, `user 1 renamed the group to "Crag crew" and let new members read the whole history`, "user 1 made user 2 an admin",
		"user 2 added user 4", "user 2 owns the group now (from user 1)", "user 3 left")

	mustOK(t, chatctl(t, env, "send", "--user", "2", "--conversation", "2", "--body", "我们明天在北京开会"))
	r = mustOK(t, chatctl(t, env, "search", "--user", "4", "--query", "北京"))
	has(r, "[conv 2 #6] user 2: 我们明天在[北京]开会")
	r = mustOK(t, chatctl(t, env, "search", "--user", "3", "--query", "北京"))
	has(r, `nothing found for "北京"`)
}

// TestProfileOfShowsMoreThanAHundredUsers: profile --of with more than
// the 100 ids chatd answers per request failed with "invalid"; it shows
// them all now, an id given twice once.
func TestProfileOfShowsMoreThanAHundredUsers(t *testing.T) {
	srv, env := startChatdEnv(t)
	var members []int64
	ids := []string{"1"}
	for id := int64(2); id <= 250; id++ {
		members = append(members, id)
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	if _, err := srv.Service.CreateGroup(context.Background(), 1, "big", members); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, "7", "9999")
	r := mustOK(t, chatctl(t, env, "profile", "--user", "1", "--of", strings.Join(ids, ",")))
	if n := strings.Count(r.stdout, "\nuser ") + 1; n != 250 || !strings.Contains(r.stdout, "(1 of 251 users share no conversation") {
		t.Fatalf("%d profiles shown:\n%s", n, r.stdout)
	}
}
