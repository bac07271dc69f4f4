package faults_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// hardeningCases are the attacks of issue 18 in the hostile-input table:
// Wills, QoS 2, topic aliases, long filters and one user's connections.
func hardeningCases(t *testing.T, url, addr string, conv int64) []attackCase {
	forged := []byte(`{"type":"message.new","conversationId":1,"seq":1,"senderId":3,"body":"FORGED"}`)
	return []attackCase{
		{"Will on another user's events or rpc topic (forged message.new): CONNACK 0x87 / 0x05, nothing reaches the victim", func(t *testing.T) {
			victim := device{user: 2, clientID: "will-victim", version: 5}.mustConnect(t, addr, 5*time.Second)
			for _, v := range []byte{5, 4} {
				for _, topic := range []string{testnode.EventsTopic(2), "chat/v1/user/2/rpc"} {
					want := byte(0x87)
					if v == 4 {
						want = 0x05
					}
					c, ack, err := mqtttest.Dial(addr, mqtttest.Options{Version: v, ClientID: "will-" + newID()[:8], Password: testnode.Token(t, 1), Clean: true,
						Will: mqtttest.Will{Topic: topic, Payload: forged, QoS: 1}})
					if err == nil {
						c.Drop()
						t.Errorf("v%d Will on %s: CONNECT accepted", v, topic)
					} else if ack.ReasonCode != want {
						t.Errorf("v%d Will on %s: CONNACK 0x%02x, want 0x%02x", v, topic, ack.ReasonCode, want)
					}
				}
			}
			deadline := time.Now().Add(500 * time.Millisecond)
			for time.Now().Before(deadline) {
				select {
				case pk := <-victim.Publishes:
					if strings.Contains(string(pk.Payload), "FORGED") {
						t.Fatalf("the victim received a Will: %s", pk.Payload)
					}
				case <-time.After(10 * time.Millisecond):
				}
			}
		}},
		{"QoS 2 PUBLISH: v5 DISCONNECT 0x9B, 3.1.1 connection closed", func(t *testing.T) {
			for _, v := range []byte{5, 4} {
				c := attacker(t, addr, v)
				if _, err := c.Publish(testnode.MsgTopic(conv), 2, testnode.SendPayload(newID(), "qos 2")); err == nil {
					t.Errorf("v%d QoS 2 publish answered", v)
				}
				testkit.WaitFor(t, 5*time.Second, "the connection to close", c.Closed)
				pk, got := c.ServerDisconnect()
				if (v == 5 && (!got || pk.ReasonCode != 0x9B)) || (v == 4 && got) {
					t.Errorf("v%d: DISCONNECT %v 0x%02x", v, got, pk.ReasonCode)
				}
			}
		}},
		{"topic alias above the maximum (16): DISCONNECT 0x94", func(t *testing.T) {
			c := attacker(t, addr, 5)
			if _, err := c.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(newID(), "alias 17"), mqtttest.PublishOpts{TopicAlias: 17}); err == nil {
				t.Error("alias 17 acknowledged")
			}
			testkit.WaitFor(t, 5*time.Second, "the connection to close", c.Closed)
			if pk, ok := c.ServerDisconnect(); !ok || pk.ReasonCode != 0x94 {
				t.Errorf("DISCONNECT %v 0x%02x, want 0x94", ok, pk.ReasonCode)
			}
		}},
		{"2,000 refused QoS 0 publishes with 60 KiB topics setting aliases 1-16 again and again on a persistent session: refused, heap back where it was", func(t *testing.T) {
			before := sampleMem(t)
			c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "alias-flood", Password: testnode.Token(t, 1), Clean: false, Expiry: 3600, ReadBuffer: 4096})
			if err != nil {
				t.Fatal(err)
			}
			pad := strings.Repeat("a", 60<<10)
			for i := 0; i < 2000; i++ {
				if _, err := c.Publish(fmt.Sprintf("chat/v1/x/%05d/%s", i, pad), 0, testnode.SendPayload(newID(), "x"), mqtttest.PublishOpts{TopicAlias: uint16(i%16 + 1)}); err != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
				select {
				case <-c.Publishes: // the forbidden error event: the server is done with it
				case <-time.After(10 * time.Second):
					t.Fatalf("no error event for publish %d", i)
				}
			}
			c.Disconnect()
			runtime.GC()
			after := sampleMem(t)
			t.Logf("heap in use before %s, after the 2,000 aliases and the disconnect %s", mib(int64(before.heap)), mib(int64(after.heap)))
			if growth := int64(after.heap) - int64(before.heap); growth > 8<<20 {
				t.Errorf("heap grew by %s and stayed", mib(growth))
			}
		}},
		{"subscription filter over 256 bytes in the own tree: 0x87 / 0x80", func(t *testing.T) {
			for _, v := range []byte{5, 4} {
				want := byte(0x87)
				if v == 4 {
					want = 0x80
				}
				if codes, err := attacker(t, addr, v).Subscribe("chat/v1/user/1/" + strings.Repeat("x", 60<<10)); err != nil || len(codes) != 1 || codes[0] != want {
					t.Errorf("v%d: %v %v, want 0x%02x", v, codes, err, want)
				}
			}
		}},
		{"500 connections of one user (cap 20, the default): 20 accepted, the rest 0x97 / 0x03", func(t *testing.T) {
			n := startNode(t, url, map[string]string{"CHAT_MAX_CONNECTIONS_PER_USER": "20", "CHAT_NODE_ID": "hog"}) // beside the attacked node
			accepted, refused := 0, map[byte]int{}
			for i := 0; i < 500; i++ {
				v := byte(5 - i%2)
				c, ack, err := mqtttest.Dial(n.MQTTAddr(), mqtttest.Options{Version: v, ClientID: fmt.Sprintf("hog-%d", i), Password: testnode.Token(t, 77), Clean: true, ReadBuffer: 4})
				if err != nil {
					refused[ack.ReasonCode]++
					continue
				}
				t.Cleanup(c.Drop)
				accepted++
			}
			if accepted != 20 || refused[0x97]+refused[0x03] != 480 {
				t.Errorf("%d accepted, refused %v; want 20 and 480 × 0x97/0x03", accepted, refused)
			}
		}},
	}
}
