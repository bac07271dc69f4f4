package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
)

// A block taken on node a reaches the blocked user's client on node b
// through Kafka, as any profile change does: at the block the blocker's
// name alone, while blocked each change of the blocker as the name alone
// (a new display name labels the blocker's messages in the groups they
// share), at the unblock the whole profile. Another member on node b gets
// the whole profile each time (at the block, unchanged).
func TestABlockOnOneNodeShowsTheBlockedUserOnAnotherTheBlockersNameAloneAndItsChanges(t *testing.T) {
	t.Parallel()
	a, b := startKafkaPair(t, "bp", nil)
	ctx := context.Background()
	const blocker, blocked, other = 1, 2, 3
	mustGroup(t, ctx, a, blocker, "climbers", []int64{blocked, other})
	bc := rawClient(t, b.MQTTAddr(), blocked, "blocked-b", 5, true)
	oc := rawClient(t, b.MQTTAddr(), other, "other-b", 5, true)
	warm := rawClient(t, b.MQTTAddr(), blocker, "blocker-b", 5, true)
	sessionLoaded(t, b, "blocked-b")
	sessionLoaded(t, b, "other-b")
	waitForConsumer(t, a, b, warm)
	const avatar = "https://img.example/ann.png"
	put := func(method, path string, body any) {
		t.Helper()
		if r := httpDo(t, a, blocker, method, path, body); r.status >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
		}
	}
	want := func(c *mqtttest.Client, step, name, avatar, about string) {
		t.Helper()
		pk := nextPublish(t, c, step+": a profile.updated on node b", 15*time.Second, func(pk packets.Packet) bool {
			return bytes.Contains(pk.Payload, []byte(`"type":"profile.updated"`))
		})
		var ev chat.Event
		if err := json.Unmarshal(pk.Payload, &ev); err != nil || ev.DisplayName == nil || *ev.DisplayName != name ||
			ev.Avatar == nil || *ev.Avatar != avatar || ev.About == nil || *ev.About != about {
			t.Errorf("%s: profile.updated %s on node b, want %s %q %q", step, pk.Payload, name, avatar, about)
		}
	}

	put("PUT", "/v1/me", map[string]string{"displayName": "Ann", "about": "climber", "avatarUrl": avatar})
	want(bc, "the profile", "Ann", avatar, "climber")
	want(oc, "the profile, to the other member", "Ann", avatar, "climber")

	put("PUT", "/v1/me/blocks/2", nil)
	want(bc, "at the block", "Ann", "", "")
	want(oc, "at the block, to the other member", "Ann", avatar, "climber")

	put("PUT", "/v1/me", map[string]string{"displayName": "Annie"})
	want(bc, "the blocker renamed while blocked", "Annie", "", "")
	want(oc, "the blocker renamed, to the other member", "Annie", avatar, "climber")

	put("DELETE", "/v1/me/blocks/2", nil)
	want(bc, "at the unblock", "Annie", avatar, "climber")
}
