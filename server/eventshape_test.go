package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
)

// An event reaches a client connected to the node that committed it and
// a client connected to another node (through Kafka) as the same bytes:
// the payload of the events topic is one shape on every node, without
// the Kafka record's eventId (docs/protocol.md, Events).
func TestAnEventReachesClientsOfTheCommittingNodeAndOfAnotherNodeAsTheSameBytes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two chatd nodes and Kafka")
	}
	a, b := startKafkaPair(t, "shape", nil)
	ctx := context.Background()
	const owner, onA, onB = 1, 2, 3
	g := mustGroup(t, ctx, a, owner, "shape", []int64{onA, onB})
	local := rawClient(t, a.MQTTAddr(), onA, "shape-local", 5, true)
	relayed := rawClient(t, b.MQTTAddr(), onB, "shape-relayed", 5, true)
	waitForConsumer(t, a, b, rawClient(t, b.MQTTAddr(), owner, "shape-warm", 5, true))

	same := func(what, typ string) {
		t.Helper()
		of := func(c *mqtttest.Client, where string) []byte {
			t.Helper()
			return nextPublish(t, c, what+" "+where, 20*time.Second, func(pk packets.Packet) bool {
				return bytes.Contains(pk.Payload, []byte(`"type":"`+typ+`"`))
			}).Payload
		}
		l, r := of(local, "on the committing node"), of(relayed, "on the other node")
		if !bytes.Equal(l, r) {
			t.Errorf("%s: the committing node's client got\n%s\nthe other node's\n%s", what, l, r)
		}
	}

	mustSendAs(t, a, g.ID, owner, "hello")
	same("a message", chat.EventMessageNew)
	if r := httpDo(t, a, owner, "PATCH", fmt.Sprintf("/v1/conversations/%d", g.ID), map[string]string{"title": "renamed"}); r.status != 200 {
		t.Fatalf("rename: %d %s", r.status, r.body)
	}
	same("a rename", chat.EventConversationUpdated)
	if r := httpDo(t, a, owner, "PUT", "/v1/me", map[string]string{"displayName": "Ann"}); r.status != 200 {
		t.Fatalf("profile: %d %s", r.status, r.body)
	}
	same("a profile change", chat.EventProfileUpdated)
}
