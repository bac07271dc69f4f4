package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A CONNECT chatd accepted whose CONNACK cannot be written (here: it is
// larger than the client's own Maximum Packet Size; on a phone, the peer
// gone) gets no OnSessionEstablished and no OnDisconnect from mochi. It
// must leave nothing behind all the same: no client in mochi's list, no
// session row, no connection counted for the user.
func TestAConnectWhoseConnackCannotBeWrittenLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_CONNECTIONS_PER_USER": "2"})
	before := srv.Broker.Server.Clients.Len()
	for i := range 3 {
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("tiny-%d", i),
			Username: "7", Password: testnode.Token(t, 7), Clean: true, Properties: packets.Properties{MaximumPacketSize: 4}})
		if err == nil {
			c.Drop()
			t.Fatal("connected, though no CONNACK fits in 4 bytes")
		}
	}
	sessions := func() int {
		return pgtest.QueryOne[int](t, srv.Pool, `SELECT count(*) FROM chat_session WHERE client_id LIKE 'tiny-%'`)
	}
	testkit.WaitFor(t, 10*time.Second, "the failed connects to be forgotten", func() bool {
		return srv.Broker.Server.Clients.Len() == before && sessions() == 0
	})
	if got := srv.Broker.Server.Clients.Len(); got != before {
		t.Errorf("mochi holds %d clients, %d before the failed connects", got, before)
	}
	// The user's two connection slots are free: two devices connect.
	rawClient(t, srv.MQTTAddr(), 7, "phone", 5, true)
	rawClient(t, srv.MQTTAddr(), 7, "laptop", 5, true)
}

// A client id longer than the server keeps is refused as an invalid
// identifier (v5 0x85, 3.1.1 0x02), a final answer, not 0x88 / 0x03
// "try again later" the database's refusal of an oversized key would give
// (a client would retry it for ever), and the limit is the same for clean
// and persistent sessions.
func TestAnOverlongClientIDIsRefusedAsAnInvalidIdentifier(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	// Random, so that PostgreSQL cannot compress it below its index
	// row limit.
	raw := make([]byte, 1500)
	_, _ = rand.Read(raw)
	long := []byte(hex.EncodeToString(raw))
	for _, v := range []byte{4, 5} {
		for _, clean := range []bool{true, false} {
			id := fmt.Sprintf("%s-%d-%v", long, v, clean)
			c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: id,
				Username: "7", Password: testnode.Token(t, 7), Clean: clean, Expiry: expiryFor(v, clean)})
			if err == nil {
				c.Drop()
				t.Errorf("v%d clean=%v: connected with a %d-byte client id", v, clean, len(id))
				continue
			}
			want := packets.ErrClientIdentifierNotValid.Code
			if v == 4 {
				want = packets.Err3ClientIdentifierNotValid.Code
			}
			if ack.ReasonCode != want {
				t.Errorf("v%d clean=%v: CONNACK 0x%02x, want 0x%02x (identifier rejected)", v, clean, ack.ReasonCode, want)
			}
		}
	}
	// A 256-byte one is fine.
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: string(long[:256]),
		Username: "7", Password: testnode.Token(t, 7), Clean: false, Expiry: 3600})
	if err != nil {
		t.Fatalf("256-byte client id: %v (0x%02x)", err, ack.ReasonCode)
	}
	c.Drop()
}

// MQTT 3.1.1 lets a client leave its client id empty only with clean
// session 1 (the server then assigns one); with clean session 0 the server
// must answer 0x02 identifier rejected [MQTT-3.1.3-8], a final answer. It
// got 0x03 server unavailable, which tells the device to retry later: it
// retried for ever. With clean session 1, an empty id connects and chats.
func TestAV311EmptyClientIDWithCleanSession0IsRejectedAsAnIdentifier(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 4, ClientID: "",
		Username: "1", Password: testnode.Token(t, 1), Clean: false})
	if err == nil {
		c.Drop()
		t.Fatal("v3.1.1 connected with an empty client id and clean session 0")
	}
	if want := packets.Err3ClientIdentifierNotValid.Code; ack.ReasonCode != want {
		t.Fatalf("CONNACK 0x%02x, want 0x%02x (identifier rejected)", ack.ReasonCode, want)
	}

	c, ack, err = mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 4, ClientID: "",
		Username: "1", Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		t.Fatalf("empty client id with clean session 1: %v (0x%02x)", err, ack.ReasonCode)
	}
	t.Cleanup(c.Drop)
	if codes, err := c.Subscribe(testnode.EventsTopic(1)); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe: %v %v", codes, err)
	}
	if ack, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "no id")); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send: 0x%02x %v", ack.ReasonCode, err)
	}
	if ev := nextEvent(t, c, chat.EventMessageNew, 5*time.Second); ev.Body != "no id" {
		t.Fatalf("own message.new: %+v", ev)
	}
}
