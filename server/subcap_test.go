package server_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testnode"
)

// The cap of 16 subscriptions counts the subscriptions a client would
// hold: a filter the ACL refuses takes no place under it, and a filter
// repeated in one SUBSCRIBE is one subscription. Before, both counted, so a
// SUBSCRIBE listing other users' topics before its own events topic had
// the events topic refused, on a connection holding no subscription.
func TestTheSubscriptionCapCountsOnlyTheSubscriptionsGranted(t *testing.T) {
	t.Parallel()
	srv, _ := startDirect(t, nil)
	for _, v := range []byte{5, 4} {
		refused := byte(0x87)
		if v == 4 {
			refused = 0x80
		}
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("subcap-v%d", v), Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Drop)
		subscribe := func(what string, want []byte, filters ...string) {
			t.Helper()
			codes, err := c.Subscribe(filters...)
			if err != nil || !slices.Equal(codes, want) {
				t.Fatalf("v%d %s: SUBACK %v %v, want %v", v, what, codes, err, want)
			}
		}
		own := func(i int) string { return fmt.Sprintf("chat/v1/user/1/x%d", i) }

		var want []byte
		var fs []string
		for i := range 16 {
			fs = append(fs, fmt.Sprintf("chat/v1/user/2/x%d", i))
			want = append(want, refused)
		}
		fs = append(fs, testnode.EventsTopic(1), testnode.EventsTopic(1))
		want = append(want, 1, 1)
		subscribe("16 refused filters, then the own events topic twice", want, fs...)

		// 14 new filters, then a 15th twice: 16 subscriptions in all.
		fs, want = nil, nil
		for i := range 15 {
			fs = append(fs, own(i))
			want = append(want, 1)
		}
		fs = append(fs, own(14))
		want = append(want, 1)
		subscribe("up to the cap", want, fs...)

		subscribe("a 17th subscription", []byte{refused}, own(15))
		subscribe("an existing subscription again at the cap", []byte{1}, own(3))
		c.Disconnect()
	}
}
