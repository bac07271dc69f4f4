package server_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	paholog "github.com/eclipse/paho.golang/paho/log"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// A device that goes silent (no packet, not even PINGREQ) is disconnected
// after 1.5 × its keepalive, not before, and its persistent session stays:
// it resumes with session present and gets what was sent meanwhile.
func TestASilentDeviceIsDisconnectedAfterOneAndAHalfKeepalivesAndKeepsItsSession(t *testing.T) {
	srv, conv := startDirect(t, nil)
	for _, v := range []byte{4, 5} {
		id := fmt.Sprintf("silent-v%d", v)
		c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: id, Password: testnode.Token(t, 2),
			Expiry: expiryFor(v, false), Keepalive: 2})
		if err != nil {
			t.Fatal(err)
		}
		if codes, err := c.Subscribe(testnode.EventsTopic(2)); err != nil || codes[0] >= 0x80 {
			t.Fatalf("v%d subscribe: %v %v", v, codes, err)
		}
		start := time.Now()
		testkit.Receive(t, c.Done, 10*time.Second, fmt.Sprintf("v%d: a device silent for 10 s with keepalive 2 s is still connected", v))
		if d := time.Since(start); d < 2900*time.Millisecond {
			t.Fatalf("v%d: disconnected after %v of silence, before 1.5 × keepalive (3 s)", v, d)
		}
		body := fmt.Sprintf("while v%d was away", v)
		mustSendAs(t, srv, conv.ID, 1, body)
		back := resumePresent(t, srv.MQTTAddr(), 2, id, v, "the session did not survive the keepalive timeout")
		if ev := nextEvent(t, back, chat.EventMessageNew, 5*time.Second); ev.Body != body {
			t.Fatalf("v%d: resumed with %+v, want %q", v, ev, body)
		}
		disconnect(t, srv, back, id)
	}
}

// everyPinger is a paho Pinger that sends PINGREQ every interval whatever
// the keepalive, or never (interval 0: a silent client).
type everyPinger struct{ interval time.Duration }

func (p everyPinger) Run(ctx context.Context, conn net.Conn, _ uint16) error {
	if p.interval == 0 {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := pahopackets.NewControlPacket(pahopackets.PINGREQ).WriteTo(conn); err != nil {
				return err
			}
		}
	}
}

func (everyPinger) PacketSent()             {}
func (everyPinger) PacketReceived()         {}
func (everyPinger) PingResp()               {}
func (everyPinger) SetDebug(paholog.Logger) {}

// The server closes a connection after 1.5 × its keepalive without a
// packet, exactly, an odd keepalive too [MQTT-3.1.2-22]: a client with
// keepalive 1 s whose PINGREQs come every 1.25 s stays connected, and a
// silent one is disconnected after 1.5 s, not the whole seconds mochi
// counts (1 s).
func TestAnOddKeepaliveGetsAllOfItsOneAndAHalfTimesBeforeTheServerCloses(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), nil)
	dial := func(id string, ping time.Duration) *pahoConn {
		pc, _ := dialPaho(t, srv.MQTTAddr(), 1, id, func(cfg *paho.ClientConfig, cp *paho.Connect) {
			cfg.PingHandler = everyPinger{ping}
			cp.KeepAlive = 1
		})
		return pc
	}
	pinging := dial("keepalive-1-pinging", 1250*time.Millisecond)
	select {
	case <-pinging.Done():
		t.Fatal("a client with keepalive 1 s pinging every 1.25 s was disconnected")
	case <-time.After(4 * time.Second):
	}
	silent := dial("keepalive-1-silent", 0)
	start := time.Now()
	testkit.Receive(t, silent.Done(), 5*time.Second, "a silent client with keepalive 1 s is still connected after 5 s")
	// The deadline starts a moment before the CONNACK this clock starts at.
	if d := time.Since(start); d < 1400*time.Millisecond || d > 2500*time.Millisecond {
		t.Errorf("a silent client with keepalive 1 s was disconnected after %v, want 1.5 s", d.Round(time.Millisecond))
	}
}
