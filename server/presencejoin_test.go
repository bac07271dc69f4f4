package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// stateSeen waits for c's next presence event about user and checks it
// gives user's state: online as want, with a lastSeen.
func stateSeen(t *testing.T, c *mqtttest.Client, user int64, want bool, what string) {
	t.Helper()
	if ev := nextPresence(t, c, user, 5*time.Second); *ev.Online != want {
		t.Fatalf("%s: %+v about user %d, want online %v", what, ev, user, want)
	}
}

// addMember adds user to group g on srv as actor.
func addMember(t *testing.T, srv *server.Server, actor, g, user int64) {
	t.Helper()
	if code := api(t, srv, actor, "POST", fmt.Sprintf("/v1/conversations/%d/members", g), map[string]int64{"userId": user}, nil); code != 201 {
		t.Fatalf("user %d adds user %d to group %d: %d", actor, user, g, code)
	}
}

// TestUsersWhoStartSharingASmallConversationGetEachOthersPresence: users
// 1 and 2, online, share nothing; when 2 is added to a group of 1's, each
// gets the other's current state at once (else neither would show the
// other until their next change). So do 2 and 4 when 4 is added too, but
// not 1 and 4, who share another small group already; and 2 and 5 when
// they open their direct conversation. The member.added clients get
// carries none of the lists.
func TestUsersWhoStartSharingASmallConversationGetEachOthersPresence(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_PRESENCE_PUSH": "true"})
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, 1, "g", nil)
	mustGroup(t, ctx, srv, 1, "also", []int64{4})
	one := rawClient(t, srv.MQTTAddr(), 1, "dev-1", 5, true)
	two := rawClient(t, srv.MQTTAddr(), 2, "dev-2", 5, true)
	five := rawClient(t, srv.MQTTAddr(), 5, "dev-5", 5, true)
	four := rawClient(t, srv.MQTTAddr(), 4, "dev-4", 5, true)
	stateSeen(t, one, 4, true, "user 1, when user 4 connected")

	addMember(t, srv, 1, g.ID, 2)
	// In either order: the member.added, with none of the lists, and
	// user 1's state.
	var added, state bool
	nextPublish(t, two, "member.added and presence about user 1", 5*time.Second, func(pk packets.Packet) bool {
		var ev presenceSeen
		if json.Unmarshal(pk.Payload, &ev) != nil {
			return false
		}
		switch {
		case ev.Type == chat.EventMemberAdded:
			if bytes.Contains(pk.Payload, []byte("presence")) {
				t.Fatalf("a client got the add's presence lists: %s", pk.Payload)
			}
			added = true
		case ev.Type == chat.EventPresence && ev.UserID == 1:
			if ev.Online == nil || !*ev.Online || ev.LastSeen == nil || ev.Hidden {
				t.Fatalf("user 2, added to user 1's group: %s, want online with lastSeen", pk.Payload)
			}
			state = true
		}
		return added && state
	})
	stateSeen(t, one, 2, true, "user 1, who added user 2")

	addMember(t, srv, 1, g.ID, 4)
	stateSeen(t, four, 2, true, "user 4, added to a group with user 2")
	stateSeen(t, two, 4, true, "user 2, when user 4 was added")
	noPresence(t, four, 1, 300*time.Millisecond)
	noPresence(t, one, 4, 100*time.Millisecond)

	mustDirect(t, ctx, srv, 5, 2)
	stateSeen(t, two, 5, true, "user 2, when user 5 opened their direct conversation")
	stateSeen(t, five, 2, true, "user 5, who opened it")
}

// TestAnAddOnOneNodeShowsPresenceToTheAddedUserOnAnother: user 2, on
// node b, shares only a large group with user 1 (no presence); user 1
// adds 2 to a small group on node a. The member.added that reaches node b
// gives user 2 user 1's state there, and user 1 on node a gets user 2's.
func TestAnAddOnOneNodeShowsPresenceToTheAddedUserOnAnother(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two nodes and Kafka")
	}
	a, _, friend := kafkaPairConsuming(t, "pj", map[string]string{"CHAT_PRESENCE_PUSH": "true", "CHAT_LARGE_GROUP": "2"},
		func(a *server.Server) chat.Conversation {
			return mustGroup(t, context.Background(), a, 1, "large", []int64{2, 3})
		})
	dev := rawClient(t, a.MQTTAddr(), 1, "dev-1", 5, true)
	g := mustGroup(t, context.Background(), a, 1, "g", nil)
	noPresence(t, friend, 1, time.Second)
	addMember(t, a, 1, g.ID, 2)
	stateSeen(t, friend, 1, true, "user 2 on node b, added to user 1's group on node a")
	stateSeen(t, dev, 2, true, "user 1 on node a, who added user 2")
}
