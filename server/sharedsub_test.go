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
