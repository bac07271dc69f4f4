package server_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// connectsWithOutcome is chat_mqtt_connects_total{outcome} on srv.
func connectsWithOutcome(t *testing.T, srv *server.Server, outcome string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "chat_mqtt_connects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A node with CHAT_MAX_PENDING_CONNECTS_PER_IP closes at once the
// connection of an address that holds that many without a CONNECT, counts
// it as too_many_pending, and lets a device from another address connect
// with its token meanwhile.
func TestANodeClosesAConnectionOverThePendingCapAndLetsOtherAddressesIn(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_MAX_PENDING_CONNECTS_PER_IP": "4"})
	addr := srv.MQTTAddr()
	dial := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", ip, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for range 4 {
		dial("127.0.0.2")
	}
	testkit.WaitFor(t, 5*time.Second, "the 4 silent connections to wait for their CONNECT", func() bool {
		return srv.Broker.AwaitingConnect() == 4
	})
	over := dial("127.0.0.2")
	_ = over.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := over.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("the 5th silent connection of 127.0.0.2 was not closed within 3 s: %v", err)
	}
	if n := connectsWithOutcome(t, srv, "too_many_pending"); n != 1 {
		t.Fatalf("chat_mqtt_connects_total{outcome=\"too_many_pending\"} = %v, want 1", n)
	}
	c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "device", Username: "7",
		Password: testnode.Token(t, 7), Clean: true, LocalAddr: "127.0.0.3"})
	if err != nil {
		t.Fatalf("a device from 127.0.0.3 did not connect: %v", err)
	}
	c.Drop()
}
