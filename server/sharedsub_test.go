package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// chatd has no shared subscriptions and says so: the v5 CONNACK announces
// Shared Subscription Available 0, which paho honours by not sending one,
// and a client that sends one anyway gets SUBACK 0x9E (Shared
// Subscriptions not supported, MQTT 5 §3.9.3), not 0x87 (not authorized),
// which would tell it to look at its permissions. MQTT 3.1.1 has only
// 0x80. A shared filter beside an ordinary one refuses only itself.
func TestASharedSubscriptionIsRefusedAsNotSupportedNotAsNotAuthorized(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	pc, ca := dialPaho(t, srv.MQTTAddr(), 1, "shared-paho", nil)
	if ca.Properties == nil || ca.Properties.SharedSubAvailable {
		t.Fatalf("CONNACK properties %+v: Shared Subscription Available not 0", ca.Properties)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/g/" + testnode.EventsTopic(1), QoS: 1}}}); !errors.Is(err, paho.ErrInvalidArguments) {
		t.Errorf("paho subscribed to a shared filter after the CONNACK said none: %v", err)
	}

	filters := []string{"$share/g/" + testnode.EventsTopic(1), "$share/g/#", testnode.EventsTopic(1)}
	for _, tc := range []struct {
		v    byte
		want []byte
	}{{5, []byte{0x9E, 0x9E, 0x01}}, {4, []byte{0x80, 0x80, 0x01}}} {
		c, _ := dialAs(t, srv.MQTTAddr(), 1, fmt.Sprintf("shared-v%d", tc.v), tc.v, true)
		codes, err := c.Subscribe(filters...)
		if err != nil || !slices.Equal(codes, tc.want) {
			t.Errorf("v%d SUBSCRIBE %q: SUBACK % x %v, want % x", tc.v, filters, codes, err, tc.want)
		}
	}
}

// mochi takes a filter for a shared subscription whatever the case of its
// $share ($SHARE/…, $Share/…: IsSharedFilter), so chatd's rules for shared
// subscriptions go by the same test. paho, which looks for a lower-case
// "$share" only, sends these despite the CONNACK. A v5 one gets SUBACK
// 0x9E as $share/ does (it got 0x87), one with No Local DISCONNECT 0x82
// and nothing of its SUBSCRIBE processed (it got mochi's SUBACK 0x82, no
// SUBACK code), and a 3.1.1 one 0x80.
func TestASharedSubscriptionInUpperOrMixedCaseIsRefusedAsOne(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	events := testnode.EventsTopic(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	pc, _ := dialPaho(t, srv.MQTTAddr(), 1, "SHARE-paho", nil)
	sa, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		{Topic: "$SHARE/g/" + events, QoS: 1}, {Topic: "$Share/g/#", QoS: 1}, {Topic: events, QoS: 1}}})
	if want := []byte{0x9E, 0x9E, 0x01}; sa == nil || !slices.Equal(sa.Reasons, want) {
		t.Errorf("paho SUBSCRIBE $SHARE/g/…, $Share/g/#, events: SUBACK %+v (%v), want % x", sa, err, want)
	}

	pn, _ := dialPaho(t, srv.MQTTAddr(), 1, "SHARE-nolocal-paho", nil)
	sub := &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$SHARE/g/" + events, QoS: 1, NoLocal: true}, {Topic: events, QoS: 1}}}
	answered := make(chan string, 1)
	go func() {
		sa, err := pn.Subscribe(ctx, sub)
		answered <- fmt.Sprintf("SUBACK %+v %v", sa, err)
	}()
	select {
	case d := <-pn.disconnect:
		if d.ReasonCode != 0x82 {
			t.Errorf("No Local on $SHARE/g/…: DISCONNECT 0x%02x, want 0x82 (protocol error)", d.ReasonCode)
		}
	case <-ctx.Done():
		t.Errorf("No Local on $SHARE/g/…: no DISCONNECT (%s), want 0x82 (protocol error)", <-answered)
	}
	if srv.Hub.Ready("SHARE-nolocal-paho") {
		t.Error("the SUBSCRIBE with No Local on $SHARE/g/… released event delivery")
	}

	c, _ := dialAs(t, srv.MQTTAddr(), 1, "SHARE-v4", 4, true)
	if codes, err := c.Subscribe("$SHARE/g/"+events, "$Share/g/#", events); err != nil || !slices.Equal(codes, []byte{0x80, 0x80, 0x01}) {
		t.Errorf("v3.1.1 SUBSCRIBE $SHARE/g/…, $Share/g/#, events: SUBACK % x %v, want 80 80 01", codes, err)
	}
}
