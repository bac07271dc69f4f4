package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// sendN publishes n messages from c into conv, each acknowledged.
func sendN(t *testing.T, c *mqtttest.Client, conv int64, n int, prefix string) {
	t.Helper()
	for i := 0; i < n; i++ {
		ack, err := c.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(newID(), fmt.Sprintf("%s %d", prefix, i)))
		if err != nil || ack.ReasonCode >= 0x80 {
			t.Fatalf("send %s %d: 0x%02x %v", prefix, i, ack.ReasonCode, err)
		}
	}
}

func TestOfflineMemberReceivesEveryMissedMessageAfterServerRestart(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_MAX_INFLIGHT": "16"} // far below the 500 missed messages
	srv := startNode(t, url, env)
	conv := mustGroup(t, context.Background(), srv, 1, "offline", []int64{2})
	for _, v := range []byte{5, 4} {
		clientID := fmt.Sprintf("phone-2-v%d", v)
		before := parkSession(t, srv, 2, clientID, v, conv.ID)

		sender := rawClient(t, srv.MQTTAddr(), 1, fmt.Sprintf("sender-v%d", v), 5, true)
		sendN(t, sender, conv.ID, 250, "before restart")
		sender.Drop()
		srv = restartNode(t, srv, url, env)
		sender = rawClient(t, srv.MQTTAddr(), 1, fmt.Sprintf("sender2-v%d", v), 5, true)
		sendN(t, sender, conv.ID, 250, "after restart")

		back := rawClient(t, srv.MQTTAddr(), 2, clientID, v, false)
		got := collectMessages(t, back, conv.ID, 500, 30*time.Second)
		assertInOrder(t, got, before+1)
		back.Disconnect()
	}
}

func TestOfflineMemberCatchesUpAfterChatdIsKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills a chatd process")
	}
	url := pgtest.NewDB(t)
	bin := buildChatd(t)
	addr := testkit.FreeAddr(t)
	dataDir := t.TempDir()
	start := func() *exec.Cmd {
		return startProcess(t, bin, addr, os.Stderr, "CHAT_DATABASE_URL="+url, "CHAT_DATA_DIR="+dataDir, "CHAT_MAX_INFLIGHT=16", "CHAT_LOG_LEVEL=warn")
	}
	proc := start()
	// Set up through the server itself: user 1 creates the group over HTTP-free RPC is
	// not needed; a direct SQL-free path is the in-process service on the same DB.
	pool := openPool(t, url)
	svc := chat.NewService(newStore(pool), chat.DefaultLimits())
	conv, err := svc.CreateGroup(context.Background(), 1, "killed", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	away := rawClient(t, addr, 2, "phone-2", 4, false)
	away.Disconnect()
	sender := rawClient(t, addr, 1, "sender", 5, true)
	sendN(t, sender, conv.ID, 250, "before kill")
	_ = proc.Process.Kill() // SIGKILL: no shutdown code runs
	_ = proc.Wait()
	start()
	sender = rawClient(t, addr, 1, "sender-b", 5, true)
	sendN(t, sender, conv.ID, 250, "after kill")
	back := rawClient(t, addr, 2, "phone-2", 4, false)
	got := collectMessages(t, back, conv.ID, 500, 30*time.Second)
	assertInOrder(t, got, 1)
}

func TestStuckSubscriberDoesNotSlowOthers(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	conv, err := srv.Service.CreateGroup(context.Background(), 1, "stuck", []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	stuck := rawClient(t, srv.MQTTAddr(), 3, "stuck-3", 5, true)
	stuck.AutoAck = false
	stuck.StopReading()
	a := rawClient(t, srv.MQTTAddr(), 1, "a", 5, true)
	b := rawClient(t, srv.MQTTAddr(), 2, "b", 4, true)
	start := time.Now()
	var wg sync.WaitGroup
	for _, u := range []int64{1, 2} {
		wg.Go(func() {
			// Separate sending connections, resending like a real client
			// if an overloaded machine makes a send time out.
			sendRetrying(t, srv.MQTTAddr(), u, conv.ID, 500)
		})
	}
	gotA := collectMessages(t, a, conv.ID, 1000, 60*time.Second)
	gotB := collectMessages(t, b, conv.ID, 1000, 60*time.Second)
	wg.Wait()
	elapsed := time.Since(start)
	assertInOrder(t, gotA, 1)
	assertInOrder(t, gotB, 1)
	if elapsed > 30*time.Second {
		t.Fatalf("1,000-message exchange took %v with a stuck subscriber", elapsed)
	}
	t.Logf("1,000 messages exchanged in %v beside a stuck subscriber", elapsed)
}

func TestReadReceiptsNeverMoveBackAndReachMembers(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	conv := mustGroup(t, ctx, srv, 1, "receipts", []int64{2, 3})
	u1 := rawClient(t, srv.MQTTAddr(), 1, "r1", 5, true)
	u2 := rawClient(t, srv.MQTTAddr(), 2, "r2", 4, true)
	sendN(t, u1, conv.ID, 5, "m")
	collectMessages(t, u2, conv.ID, 5, 10*time.Second)

	if ack, err := u2.Publish(testnode.ReadTopic(conv.ID), 1, []byte(`{"seq":4}`)); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("read 4: %v", err)
	}
	ev := nextEvent(t, u1, chat.EventReadUpdated, 5*time.Second)
	if ev.UserID != 2 || ev.Seq != 4 || ev.ConversationID != conv.ID {
		t.Fatalf("read.updated = %+v", ev)
	}
	// A late, lower receipt does not move the watermark back.
	if ack, err := u2.Publish(testnode.ReadTopic(conv.ID), 1, []byte(`{"seq":2}`)); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("read 2: %v", err)
	}
	got, err := srv.Service.GetConversation(ctx, conv.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got.Members {
		if m.UserID == 2 && m.LastReadSeq != 4 {
			t.Fatalf("watermark moved back to %d", m.LastReadSeq)
		}
	}
	seen, err := srv.Service.SeenBy(ctx, conv.ID, 1, 3)
	if err != nil || seen.SeenBy != 1 || seen.Members != 2 {
		t.Fatalf("seen by after one reader: %+v %v", seen, err)
	}
	u3 := rawClient(t, srv.MQTTAddr(), 3, "r3", 5, true)
	if ack, err := u3.Publish(testnode.ReadTopic(conv.ID), 0, []byte(`{"seq":99}`)); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("read 99 (QoS0): %v", err)
	}
	testkit.WaitFor(t, 5*time.Second, "message 4 seen by 2", func() bool {
		s, err := srv.Service.SeenBy(ctx, conv.ID, 1, 4)
		return err == nil && s.SeenBy == 2
	})
	ev = nextEvent(t, u1, chat.EventReadUpdated, 5*time.Second)
	if ev.UserID != 3 || ev.Seq != 5 {
		t.Fatalf("receipt past the end must clamp to last_seq 5: %+v", ev)
	}
}

func TestMosquittoClientsSendAndReceive(t *testing.T) {
	t.Parallel()
	pub, errPub := exec.LookPath("mosquitto_pub")
	sub, errSub := exec.LookPath("mosquitto_sub")
	if errPub != nil || errSub != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("mosquitto-clients missing on CI: .ci/run must install them")
		}
		t.Skip("mosquitto-clients not installed (apt-get install -y mosquitto-clients)")
	}
	srv, conv := startDirect(t, nil)
	host, port, _ := strings.Cut(srv.MQTTAddr(), ":")
	var out strings.Builder
	subCmd := exec.Command(sub, "-h", host, "-p", port, "-V", "mqttv311", "-i", "mosq-sub-2", "-u", "2", "-P", testnode.Token(t, 2),
		"-t", testnode.EventsTopic(2), "-q", "1", "-C", "1", "-W", "20")
	subCmd.Stdout = &out
	if err := subCmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "mosquitto_sub to subscribe", func() bool { return srv.Hub.Ready("mosq-sub-2") })
	body := "hello from mosquitto_pub"
	pubOut, err := exec.Command(pub, "-h", host, "-p", port, "-V", "mqttv5", "-i", "mosq-pub-1", "-u", "1", "-P", testnode.Token(t, 1),
		"-t", testnode.MsgTopic(conv.ID), "-q", "1", "-m", string(testnode.SendPayload(newID(), body))).CombinedOutput()
	if err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, pubOut)
	}
	if err := subCmd.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v", err)
	}
	if !strings.Contains(out.String(), body) || !strings.Contains(out.String(), `"seq":1`) {
		t.Fatalf("mosquitto_sub printed %q", out.String())
	}
}

// sendRetrying sends n messages as user from its own connection, resending
// a message with the same clientMsgId after a refusal to retry (0x80/0x83)
// or a lost connection, as clients must.
func sendRetrying(t *testing.T, addr string, user, conv int64, n int) {
	t.Helper()
	dial := func() *mqtttest.Client {
		for {
			c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("sender-%d", user), Password: testnode.Token(t, user), Clean: true, ReadBuffer: 16})
			if err == nil {
				t.Cleanup(c.Drop)
				return c
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c := dial()
	for i := 0; i < n; i++ {
		id := newID()
		for attempt := 0; ; attempt++ {
			ack, err := c.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(id, fmt.Sprintf("x %d", i)))
			if err == nil && ack.ReasonCode == 0 {
				break
			}
			if err == nil && ack.ReasonCode != 0x80 && ack.ReasonCode != 0x83 {
				t.Errorf("send %d refused: 0x%02x", i, ack.ReasonCode)
				return
			}
			if attempt > 20 {
				t.Errorf("send %d: giving up: %v", i, err)
				return
			}
			if err != nil {
				c.Drop()
				c = dial()
			}
		}
	}
}

// An MQTT 5 client's Receive Maximum bounds its unacknowledged deliveries
// [MQTT-3.3.4-9], below the server's window (CHAT_MAX_INFLIGHT). The
// session resumes with 20 messages it missed, all read in one catch-up
// query; a client that asked for 5 gets 5 and no more until it
// acknowledges. Two refused publishes after the fifth delivery are the
// barrier: the session writes its PUBACKs before any deliveries of the
// same write, so once the second PUBACK is in, whatever the first write
// carried is in too. Then, acknowledging as it reads, it gets the rest in
// order, never more than 5 unacknowledged.
func TestDeliveryKeepsToTheClientsReceiveMaximum(t *testing.T) {
	t.Parallel()
	srv, conv := startDirect(t, nil)
	const rm, missed = 5, 20
	before := parkSession(t, srv, 2, "rm5", 5, conv.ID)
	for i := range missed {
		mustSendAs(t, srv, conv.ID, 1, fmt.Sprint("m", i))
	}
	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: 5, ClientID: "rm5", Username: "2", Password: testnode.Token(t, 2),
		Expiry: 3600, Properties: packets.Properties{ReceiveMaximum: rm}, NoAutoAck: true})
	if err != nil || !ack.SessionPresent {
		t.Fatalf("resume: present=%v %v", ack.SessionPresent, err)
	}
	t.Cleanup(c.Drop)
	var got []packets.Packet
	for len(got) < rm {
		got = append(got, nextPublish(t, c, "a delivery", 10*time.Second, func(packets.Packet) bool { return true }))
	}
	for range 2 {
		if ack, err := c.Publish("chat/v1/no-such-topic", 1, []byte(`{}`)); err != nil || ack.ReasonCode != 0x87 {
			t.Fatalf("barrier publish: 0x%02x %v", ack.ReasonCode, err)
		}
	}
	if n := len(c.Publishes); n > 0 {
		t.Fatalf("%d unacknowledged QoS 1 publishes sent to a client whose Receive Maximum is %d", rm+n, rm)
	}
	unacked := rm
	for _, pk := range got {
		if err := c.Ack(pk.PacketID); err != nil {
			t.Fatal(err)
		}
		unacked--
	}
	var evs []event
	for _, pk := range got {
		var ev event
		_ = json.Unmarshal(pk.Payload, &ev)
		evs = append(evs, ev)
	}
	for len(evs) < missed {
		pk := nextPublish(t, c, "a delivery", 10*time.Second, func(packets.Packet) bool { return true })
		if unacked++; unacked > rm {
			t.Fatalf("%d unacknowledged QoS 1 publishes, Receive Maximum %d", unacked, rm)
		}
		var ev event
		_ = json.Unmarshal(pk.Payload, &ev)
		evs = append(evs, ev)
		if err := c.Ack(pk.PacketID); err != nil {
			t.Fatal(err)
		}
		unacked--
	}
	assertInOrder(t, evs, before+1)
}
