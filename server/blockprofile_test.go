package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// The blocked user's client, over MQTT: at the block a profile.updated
// with the blocker's name alone drops the avatar and about it showed; the
// blocker's later changes reach the other members whole and it as the
// name alone (a message the blocker writes afterwards, which does reach
// it, is the fence); at the unblock a profile.updated with the whole
// profile. GET /v1/users/{id} answers the name alone while the block
// holds.
func TestABlockedUsersClientLosesTheBlockersAvatarAndAboutAndHearsNoChangeOfThem(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	const blocker, blocked, other = 1, 2, 3
	g := mustGroup(t, ctx, srv, blocker, "climbers", []int64{blocked, other})
	if r := httpDo(t, srv, blocker, "PUT", "/v1/me", map[string]string{"displayName": "Ann", "about": "climber", "avatarUrl": "https://img.example/ann.png"}); r.status != 200 {
		t.Fatalf("PUT /v1/me: %d %s", r.status, r.body)
	}
	bc := rawClient(t, srv.MQTTAddr(), blocked, "blocked-2", 5, true)
	oc := rawClient(t, srv.MQTTAddr(), other, "other-3", 5, true)
	sessionLoaded(t, srv, "blocked-2")
	sessionLoaded(t, srv, "other-3")

	if r := httpDo(t, srv, blocker, "PUT", "/v1/me/blocks/2", nil); r.status != 204 {
		t.Fatalf("block: %d %s", r.status, r.body)
	}
	evs := eventsUntil(t, bc, chat.EventProfileUpdated, 10*time.Second)
	if ev := evs[len(evs)-1]; ev["userId"] != float64(blocker) || ev["displayName"] != "Ann" || ev["avatar"] != "" || ev["about"] != "" {
		t.Fatalf("at the block the blocked user got %v, want the name alone", ev)
	}
	if evs := eventsUntil(t, oc, chat.EventProfileUpdated, 10*time.Second); evs[len(evs)-1]["about"] != "climber" {
		t.Fatalf("at the block another member got %v, want the profile unchanged", evs[len(evs)-1])
	}
	var p chat.Profile
	if st := api(t, srv, blocked, "GET", "/v1/users/1", nil, &p); st != 200 || p.DisplayName != "Ann" || p.Avatar != nil || p.About != "" {
		t.Fatalf("GET /v1/users/1 by the blocked user: %d %+v, want the name alone", st, p)
	}

	if r := httpDo(t, srv, blocker, "PUT", "/v1/me", map[string]string{"displayName": "Ann", "about": "runner"}); r.status != 200 {
		t.Fatalf("PUT /v1/me: %d %s", r.status, r.body)
	}
	evs = eventsUntil(t, oc, chat.EventProfileUpdated, 10*time.Second)
	if ev := evs[len(evs)-1]; ev["about"] != "runner" {
		t.Fatalf("another member got %v, want the change", ev)
	}
	if _, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: g.ID, SenderID: blocker, ClientMsgID: newID(), Body: "fence"}); err != nil {
		t.Fatal(err)
	}
	views := 0
	for _, ev := range eventsUntil(t, bc, chat.EventMessageNew, 10*time.Second) {
		if ev["type"] == chat.EventProfileUpdated {
			views++
			if ev["avatar"] != "" || ev["about"] != "" {
				t.Errorf("the blocked user got the blocker's change %v, want the name alone", ev)
			}
		}
	}
	if views != 1 {
		t.Errorf("the blocked user got %d profile.updated of the blocker's change, want 1 with the name alone", views)
	}
	testkit.Never(t, 300*time.Millisecond, "the blocked user got the blocker's profile.updated after the fence", func() bool {
		select {
		case pk := <-bc.Publishes:
			return bytes.Contains(pk.Payload, []byte(chat.EventProfileUpdated))
		default:
			return false
		}
	})

	if r := httpDo(t, srv, blocker, "DELETE", "/v1/me/blocks/2", nil); r.status != 204 {
		t.Fatalf("unblock: %d %s", r.status, r.body)
	}
	evs = eventsUntil(t, bc, chat.EventProfileUpdated, 10*time.Second)
	if ev := evs[len(evs)-1]; ev["about"] != "runner" || ev["avatar"] != "https://img.example/ann.png" {
		t.Fatalf("at the unblock the user got %v, want the whole profile", ev)
	}
}
