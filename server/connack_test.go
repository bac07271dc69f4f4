package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

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
	sessions := func() (n int) {
		if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_session WHERE client_id LIKE 'tiny-%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
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
