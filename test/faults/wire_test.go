package faults_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// countingConn counts the bytes that cross a connection.
type countingConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

// TestBytesOnTheWirePerDeliveredMessage measures what one message.new with
// a 100-byte body costs a receiving device, MQTT v5 and v3.1.1 over TCP and
// v5 over WebSocket, and what one send costs the sender: bytes of MQTT (and
// WebSocket framing) read and written by the client's connection, without
// TCP/IP or TLS headers. docs/mobile.md quotes the figures.
func TestBytesOnTheWirePerDeliveredMessage(t *testing.T) {
	const n = 200
	body := strings.Repeat("b", 100)
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv, _, err := srv.Service.OpenDirect(context.Background(), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	type variant struct {
		name string
		v    byte
		dial func() (*countingConn, net.Conn)
	}
	tcpDial := func() (*countingConn, net.Conn) {
		c, err := net.Dial("tcp", srv.MQTTAddr())
		if err != nil {
			t.Fatal(err)
		}
		cc := &countingConn{Conn: c}
		return cc, cc
	}
	wsDial := func() (*countingConn, net.Conn) {
		var cc *countingConn
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second,
			NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				cc = &countingConn{Conn: c}
				return cc, nil
			}}
		ws, _, err := d.Dial("ws://"+srv.HTTPAddr()+"/mqtt", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cc, mqtttest.WrapWS(ws)
	}
	variants := []variant{{"MQTT 5 over TCP", 5, tcpDial}, {"MQTT 3.1.1 over TCP", 4, tcpDial}, {"MQTT 5 over WebSocket", 5, wsDial}}
	for i, vr := range variants {
		counted, conn := vr.dial()
		d := device{user: 2, clientID: fmt.Sprintf("wire-recv-%d", i), version: vr.v}
		rc, _, err := mqtttest.DialConn(conn, d.options(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Drop)
		if codes, err := rc.Subscribe(testnode.EventsTopic(2)); err != nil || codes[0] >= 0x80 {
			t.Fatalf("subscribe: %v %v", codes, err)
		}
		sc, sconn := vr.dial()
		s, _, err := mqtttest.DialConn(sconn, mqtttest.Options{Version: vr.v, ClientID: fmt.Sprintf("wire-send-%d", i), Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Drop)
		// Let the subscription settle, then count from zero.
		time.Sleep(100 * time.Millisecond)
		in0, out0 := counted.in.Load(), counted.out.Load()
		sin0, sout0 := sc.in.Load(), sc.out.Load()
		a := newApp(vr.name)
		a.start(conv.ID, int64(n*i)) // a new session starts "now"
		for k := 0; k < n; k++ {
			if ack, err := s.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), body)); err != nil || ack.ReasonCode != 0 {
				t.Fatalf("send: %v", err)
			}
		}
		done := a.follow(rc)
		last := int64(n * (i + 1))
		testkit.WaitFor(t, 30*time.Second, vr.name+" deliveries", func() bool { return a.position(conv.ID) >= last })
		// The PUBACK of the last delivery follows its PUBLISH.
		time.Sleep(100 * time.Millisecond)
		in, out := counted.in.Load()-in0, counted.out.Load()-out0
		sin, sout := sc.in.Load()-sin0, sc.out.Load()-sout0
		rc.Drop()
		<-done
		a.assertExact(t, map[int64]int64{conv.ID: last})
		t.Logf("%s: per delivered message.new (100-byte body): %.1f bytes down, %.1f bytes up (PUBACK); per send: %.1f bytes up (PUBLISH), %.1f bytes down (PUBACK)",
			vr.name, float64(in)/n, float64(out)/n, float64(sout)/n, float64(sin)/n)
	}
}
