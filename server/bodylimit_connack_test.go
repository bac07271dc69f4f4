package server_test

import (
	"strconv"
	"testing"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// TestV5ConnackTellsTheBodyLimit: a client checks a text against the
// body limit before sending it, so the v5 CONNACK says the limit itself
// (user property maxBodyBytes), the configured one, not only the packet
// size derived from it.
func TestV5ConnackTellsTheBodyLimit(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{0, 1000} {
		env := map[string]string{}
		want := "16384"
		if limit > 0 {
			env["CHAT_MAX_BODY_BYTES"] = strconv.Itoa(limit)
			want = strconv.Itoa(limit)
		}
		srv := startNode(t, pgtest.NewDB(t), env)
		c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "limit", Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		c.Drop()
		got := ""
		for _, u := range ack.Properties.User {
			if u.Key == "maxBodyBytes" {
				got = u.Val
			}
		}
		if got != want {
			t.Errorf("CHAT_MAX_BODY_BYTES %q: CONNACK user property maxBodyBytes %q, want %q", env["CHAT_MAX_BODY_BYTES"], got, want)
		}
	}
}
