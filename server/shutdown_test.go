package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// closeNode shuts srv down gracefully within 10 s.
func closeNode(t *testing.T, srv *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
}

// MQTT 3.1.1 defines no DISCONNECT from server to client: on a graceful
// shutdown an MQTT 5 client gets DISCONNECT 0x8B (server shutting down)
// and a 3.1.1 client's socket is just closed.
func TestGracefulShutdownSendsV5Disconnect0x8BAndClosesV311SocketsWithoutOne(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	v5 := rawClient(t, srv.MQTTAddr(), 1, "shutdown-v5", 5, false)
	v3 := rawClient(t, srv.MQTTAddr(), 2, "shutdown-v3", 4, false)
	closeNode(t, srv)
	for _, c := range []*mqtttest.Client{v5, v3} {
		testkit.Receive(t, c.Done, 5*time.Second, fmt.Sprintf("v%d connection still open after the shutdown", c.Version))
	}
	if pk, ok := v5.ServerDisconnect(); !ok || pk.ReasonCode != 0x8B {
		t.Errorf("v5 client: DISCONNECT %v (reason 0x%02x), want DISCONNECT 0x8B", ok, pk.ReasonCode)
	}
	if pk, ok := v3.ServerDisconnect(); ok {
		t.Errorf("v3.1.1 client got a DISCONNECT packet (reason 0x%02x), which MQTT 3.1.1 does not allow a server to send", pk.ReasonCode)
	}
}

// A second CONNECT with the same client id takes the session over; the old
// connection is closed. MQTT 5 tells it why (DISCONNECT 0x8E), 3.1.1 cannot.
func TestSessionTakeoverClosesTheOldV311ConnectionWithoutADisconnectPacket(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	for _, v := range []byte{4, 5} {
		id := fmt.Sprintf("takeover-v%d", v)
		old := rawClient(t, srv.MQTTAddr(), 1, id, v, false)
		rawClient(t, srv.MQTTAddr(), 1, id, v, false)
		testkit.Receive(t, old.Done, 5*time.Second, fmt.Sprintf("v%d: the taken-over connection is still open", v))
		checkTakenOverDisconnect(t, old, v)
	}
}

// checkTakenOverDisconnect checks how the closed connection c of protocol
// version v was told its session was taken over: v5 by DISCONNECT 0x8E,
// 3.1.1 by nothing (it has no DISCONNECT from the server).
func checkTakenOverDisconnect(t *testing.T, c *mqtttest.Client, v byte) {
	t.Helper()
	pk, got := c.ServerDisconnect()
	switch {
	case v == 4 && got:
		t.Errorf("v3.1.1: the taken-over connection got DISCONNECT 0x%02x, which MQTT 3.1.1 does not allow a server to send", pk.ReasonCode)
	case v == 5 && (!got || pk.ReasonCode != 0x8E):
		t.Errorf("v5: the taken-over connection got DISCONNECT %v 0x%02x, want 0x8E (session taken over)", got, pk.ReasonCode)
	}
}

// mosquitto_sub -V mqttv311 treats a DISCONNECT from the server as a
// protocol error and exits; with the socket just closed it reconnects, as
// a 3.1.1 client should after a graceful restart, and gets what is sent
// next.
func TestMosquittoSubV311ReconnectsAfterGracefulRestart(t *testing.T) {
	t.Parallel()
	sub, err := exec.LookPath("mosquitto_sub")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("mosquitto-clients missing on CI: .ci/run must install them")
		}
		t.Skip("mosquitto-clients not installed (apt-get install -y mosquitto-clients)")
	}
	url := pgtest.NewDB(t)
	env := nodeEnv(t, url, map[string]string{"CHAT_MQTT_ADDR": testkit.FreeAddr(t), "CHAT_HTTP_ADDR": testkit.FreeAddr(t)})
	srv := testnode.Start(t, env, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	host, port, _ := strings.Cut(srv.MQTTAddr(), ":")
	var out logtest.Buffer
	cmd := exec.Command(sub, "-h", host, "-p", port, "-V", "mqttv311", "-i", "mosq-restart-2", "-c", "-u", "2", "-P", testnode.Token(t, 2),
		"-t", testnode.EventsTopic(2), "-q", "1", "-C", "1", "-d")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error // set before exited closes
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	testkit.WaitFor(t, 10*time.Second, "mosquitto_sub to subscribe", func() bool { return srv.Hub.Ready("mosq-restart-2") })

	closeNode(t, srv)
	srv = testnode.Start(t, env, nil)
	deadline := time.Now().Add(15 * time.Second)
	for !srv.Hub.Ready("mosq-restart-2") {
		select {
		case <-exited:
			t.Fatalf("mosquitto_sub -V mqttv311 exited after the graceful shutdown instead of reconnecting (%v):\n%s", waitErr, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mosquitto_sub did not resubscribe within 15 s of the restart:\n%s", out.String())
		}
	}
	body := "after the restart"
	mustSendAs(t, srv, conv.ID, 1, body)
	select {
	case <-exited:
		if waitErr != nil || !strings.Contains(out.String(), body) {
			t.Fatalf("mosquitto_sub: %v, printed:\n%s", waitErr, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("mosquitto_sub did not print the message sent after the restart:\n%s", out.String())
	}
}

// A load balancer or Kubernetes probing /readyz on the metrics listener
// must see the node go not-ready as soon as it starts shutting down: the
// metrics listener stays up to the end so the shutdown can be watched, and
// its /readyz used to answer 200 all through the drain (the database still
// answered its ping), so traffic kept being routed to a node whose MQTT
// and HTTP listeners were already closed.
func TestReadyzOnTheMetricsListenerTurnsNotReadyAsSoonAsTheShutdownStarts(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, map[string]string{"CHAT_METRICS_ADDR": "127.0.0.1:0"})
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	readyz := func() int {
		resp, err := http.Get("http://" + srv.MetricsAddr() + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the shutdown: %d", code)
	}

	// Hold a send in flight (its conversation row locked), so the drain
	// lasts until the test lets it go.
	pool := openPool(t, url)
	release := pgtest.LockConversation(t, context.Background(), pool, conv.ID)
	c := rawClient(t, srv.MQTTAddr(), 1, "drain-ready", 5, true)
	pending, err := c.PublishAsync(testnode.MsgTopic(conv.ID), testnode.SendPayload(newID(), "in flight"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the send to wait for the row lock", func() bool {
		return pgtest.LockWaiters(t, pool) > 0
	})

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- srv.Close(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	code := readyz()
	for code == http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		code = readyz()
	}
	select {
	case err := <-closed:
		t.Fatalf("the shutdown ended (%v) while a send was held", err)
	default:
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz on the metrics listener during the shutdown: %d, want 503", code)
	}

	// The held send still commits and is acknowledged.
	release()
	if ack, err := pending.Wait(); err != nil || ack.ReasonCode != 0 {
		t.Errorf("the send in flight: PUBACK %v 0x%02x, want 0x00", err, ack.ReasonCode)
	}
	if err := <-closed; err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
}
