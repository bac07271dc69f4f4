package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// The CONNACK says Subscription Identifiers are not available, which
// makes a SUBSCRIBE carrying one a protocol error (MQTT 5 §3.2.2.3.12):
// DISCONNECT 0xA1, subscription identifiers not supported. It was granted
// (SUBACK 0x01) and the connection kept.
func TestASubscribeWithASubscriptionIdentifierIsDisconnectedWith0xA1(t *testing.T) {
	t.Parallel()
	subscribeDisconnected(t, "subid", packets.Subscriptions{{Filter: testnode.EventsTopic(2), Qos: 1, Identifier: 7}},
		packets.Properties{SubscriptionIdentifier: []int{7}}, "a Subscription Identifier", 0xA1, "subscription identifiers not supported")
}

// subscribeDisconnected has user 2 connect as client and SUBSCRIBE to
// filters with props, which must end the connection with DISCONNECT code
// (meaning says what code is) and release no event delivery; what names
// what the SUBSCRIBE has.
func subscribeDisconnected(t *testing.T, client string, filters packets.Subscriptions, props packets.Properties, what string, code byte, meaning string) {
	t.Helper()
	srv := startNode(t, pgtest.NewDB(t), nil)
	c, _ := dialAs(t, srv.MQTTAddr(), 2, client, 5, true)
	if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: filters, Properties: props}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the connection of a SUBSCRIBE with "+what+" to close", c.Closed)
	if pk, ok := c.ServerDisconnect(); !ok || pk.ReasonCode != code {
		t.Fatalf("DISCONNECT %v 0x%02x, want 0x%02X (%s)", ok, pk.ReasonCode, code, meaning)
	}
	if srv.Hub.Ready(client) {
		t.Fatal("the refused SUBSCRIBE released event delivery")
	}
}

// Retain Handling 3 does not exist: MQTT 5 makes a SUBSCRIBE with it a
// protocol error (§3.8.3.1), DISCONNECT 0x82. It was granted (SUBACK
// 0x01) and the subscription kept.
func TestASubscribeWithRetainHandling3IsAProtocolError(t *testing.T) {
	t.Parallel()
	subscribeDisconnected(t, "rh3", packets.Subscriptions{{Filter: testnode.EventsTopic(2), Qos: 1, RetainHandling: 3}},
		packets.Properties{}, "Retain Handling 3", 0x82, "protocol error")
}

// No Local on a shared subscription is a protocol error (MQTT 5
// §3.8.3.1, [MQTT-3.8.3-4]), DISCONNECT 0x82, as Retain Handling 3 is,
// though chatd has no shared subscriptions to give it; the events filter
// beside it in the SUBSCRIBE is not granted either. It was answered SUBACK
// 0x82, which is no SUBACK code.
func TestASharedSubscriptionWithNoLocalIsAProtocolError(t *testing.T) {
	t.Parallel()
	subscribeDisconnected(t, "shared-nolocal", packets.Subscriptions{{Filter: "$share/g/" + testnode.EventsTopic(2), Qos: 1, NoLocal: true},
		{Filter: testnode.EventsTopic(2), Qos: 1}}, packets.Properties{}, "No Local on a shared subscription", 0x82, "protocol error")
}

// chatd offers no enhanced authentication, and a client whose CONNECT
// named no Authentication Method must not send AUTH (MQTT-4.12.0-7): a
// protocol error, DISCONNECT 0x82 (MQTT 3.1.1, where the packet type is
// reserved, is closed). mochi called no hook for AUTH and ignored it: a
// client that asked to re-authenticate waited for an answer that never
// came.
func TestAnAuthPacketEndsItsConnectionAsAProtocolError(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	for _, v := range []byte{5, 4} {
		c, _ := dialAs(t, srv.MQTTAddr(), 1, fmt.Sprint("auth-v", v), v, true)
		if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Auth}, ReasonCode: packets.CodeReAuthenticate.Code,
			Properties: packets.Properties{AuthenticationMethod: "SCRAM-SHA-256"}}); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("the v%d connection that sent AUTH to close", v), c.Closed)
		pk, ok := c.ServerDisconnect()
		if v == 5 && (!ok || pk.ReasonCode != 0x82) {
			t.Errorf("v5: DISCONNECT %v 0x%02x, want 0x82 (protocol error)", ok, pk.ReasonCode)
		}
		if v == 4 && ok {
			t.Errorf("v3.1.1: got DISCONNECT 0x%02x", pk.ReasonCode)
		}
	}
}

// A server that does not support the Authentication Method a CONNECT
// names must close the connection, after CONNACK 0x8C or 0x87
// (MQTT-4.12.0-1). chatd admitted it by its password, and the client,
// which asked for an authentication exchange, was told nothing of it.
func TestAConnectNamingAnAuthenticationMethodIsRefusedWith0x8C(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "auth-method", Password: testnode.Token(t, 1), Clean: true,
		Properties: packets.Properties{AuthenticationMethod: "SCRAM-SHA-256", AuthenticationData: []byte("client-first")}})
	if err == nil {
		c.Drop()
		t.Fatalf("a CONNECT naming an Authentication Method was accepted (CONNACK 0x%02x)", ack.ReasonCode)
	}
	if ack.ReasonCode != 0x8C || !strings.Contains(ack.Properties.ReasonString, "Authentication Method") {
		t.Fatalf("CONNACK 0x%02x %q (%v), want 0x8C (bad authentication method) with a reason string", ack.ReasonCode, ack.Properties.ReasonString, err)
	}
}
