package server_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// Two CONNECTs of one client id a few microseconds apart: the session's
// open in PostgreSQL (which makes the connection's token the session's)
// and mochi's takeover (which keeps the later connection it lists) could
// take them in opposite orders. The connection kept then did not hold the
// session, the one that did was taken over, and neither ended it: a
// clean session's row stayed after both were gone, marked connected (a
// persistent session's expiry never started). In about one pair in
// fifteen here.
func TestTwoConnectsOfOneClientIDAtOnceLeaveTheSessionToTheConnectionKept(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	const rounds = 100
	for r := range rounds {
		user := int64(r%25 + 1)
		id := fmt.Sprint("twice-", r)
		var conns [2]net.Conn
		for i := range conns {
			c, err := net.Dial("tcp", srv.MQTTAddr())
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = c
		}
		var clients [2]*mqtttest.Client
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range conns {
			wg.Go(func() {
				<-start
				c, _, err := mqtttest.DialConn(conns[i], mqtttest.Options{Version: 5, ClientID: id, Password: testnode.Token(t, user), Clean: true})
				if err != nil {
					t.Errorf("round %d: connect %d: %v", r, i, err)
					return
				}
				clients[i] = c
				t.Cleanup(c.Drop)
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("round %d: one of the two connections of %s taken over", r, id), func() bool {
			return clients[0].Closed() != clients[1].Closed()
		})
		for _, c := range clients {
			if !c.Closed() {
				c.Disconnect()
			}
		}
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("round %d: the clean session of %s to end with its connections", r, id), func() bool {
			return pgtest.QueryOne[int](t, srv.Pool, `SELECT count(*) FROM chat_session WHERE client_id = $1`, id) == 0
		})
	}
}
