package server_test

import (
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/chatd/chatd/internal/pgtest"
)

// Request Problem Information = 0 (what autopaho sends unless told
// otherwise) forbids reason strings and user properties on PUBACKs, but
// MQTT 5 allows them on CONNACK and DISCONNECT [MQTT-3.1.2-29]: a CONNACK
// 0x9F still says when to come back (retryAfter), as protocol.md promises
// for every one, and a DISCONNECT says why it ends the connection.
func TestConnackAndDisconnectSayWhyEvenToAClientAskingForNoProblemInformation(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LIMIT_CONNECT_USER_RATE": "0.1", "CHAT_LIMIT_CONNECT_USER_BURST": "2"})
	noProblemInfo := func(_ *paho.ClientConfig, cp *paho.Connect) {
		cp.Properties = &paho.ConnectProperties{RequestProblemInfo: false}
	}
	first, _ := dialPaho(t, srv.MQTTAddr(), 1, "rpi0", noProblemInfo)
	dialPaho(t, srv.MQTTAddr(), 1, "rpi0", noProblemInfo)
	if d := first.serverDisconnect(t, "a takeover"); d.ReasonCode != 0x8E || d.Properties == nil || d.Properties.ReasonString == "" {
		t.Errorf("DISCONNECT of a takeover to a client asking for no problem information: %+v, want 0x8E with a reason string", d)
	}
	_, ca, err := connectPaho(t, srv.MQTTAddr(), 1, "rpi0-third", noProblemInfo)
	if err == nil || ca == nil || ca.ReasonCode != 0x9F {
		t.Fatalf("a connect over the user's connect rate: %+v %v, want CONNACK 0x9F", ca, err)
	}
	if got := ca.Properties.User.Get("retryAfter"); got != "10" && got != "9" {
		t.Errorf("CONNACK 0x9F to a client asking for no problem information: user property retryAfter %q, want 10 (s)", got)
	}
}
