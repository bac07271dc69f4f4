package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/internal/webpushtest"
	"github.com/chatd/chatd/server"
)

// pushEnv is a node's push settings for these tests: a short delay and
// interval, http:// endpoints (the loopback push service) and a VAPID key
// every node of the test shares.
func pushEnv(t *testing.T, keys push.VAPIDKeys, extra map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{
		"CHAT_PUSH_DELAY":        "1s",
		"CHAT_PUSH_MIN_INTERVAL": "1s",
		"CHAT_PUSH_ALLOW_HTTP":   "true",
		"CHAT_VAPID_PRIVATE_KEY": keys.Private,
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func newVAPID(t *testing.T) push.VAPIDKeys {
	t.Helper()
	k, err := push.LoadOrCreateVAPID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startPushNode starts a node on a fresh database with Web Push on (pushEnv
// with extra) and the loopback push service that its VAPID keys sign for.
func startPushNode(t *testing.T, extra map[string]string) (*server.Server, *webpushtest.Endpoint) {
	t.Helper()
	keys := newVAPID(t)
	srv := startNode(t, pgtest.NewDB(t), pushEnv(t, keys, extra))
	ep := webpushtest.NewEndpoint(keys.Public)
	t.Cleanup(ep.Close)
	return srv, ep
}

// subscribeDevice registers a subscription of the loopback endpoint as a
// webpush device of user, over HTTP like a browser.
func subscribeDevice(t *testing.T, srv *server.Server, ep *webpushtest.Endpoint, user int64, name string) int64 {
	t.Helper()
	url, sub := ep.Subscribe(name)
	var id struct{ ID int64 }
	if st := api(t, srv, user, "POST", "/v1/devices", map[string]any{"platform": "webpush", "endpoint": url,
		"keys": map[string]string{"p256dh": sub.P256dh(), "auth": sub.AuthB64()}}, &id); st != http.StatusCreated {
		t.Fatalf("register device: %d", st)
	}
	return id.ID
}

func waitAccepted(t *testing.T, ep *webpushtest.Endpoint, name string, n int, within time.Duration) []push.Notification {
	t.Helper()
	testkit.WaitFor(t, within, fmt.Sprintf("%d pushes to %s", n, name), func() bool { return len(ep.Of(name)) >= n })
	var out []push.Notification
	for _, p := range ep.Of(name) {
		var nt push.Notification
		if err := json.Unmarshal(p.Plaintext, &nt); err != nil {
			t.Fatal(err)
		}
		out = append(out, nt)
	}
	return out
}

func TestDevicesAPIAndSettingsInTheInbox(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	keys := newVAPID(t)
	srv := startNode(t, url, pushEnv(t, keys, nil))
	var v chat.VAPIDKey
	if st := api(t, srv, 1, "GET", "/v1/push/vapid", nil, &v); st != 200 || v.PublicKey != keys.Public {
		t.Fatalf("vapid: %d %+v, want %s", st, v, keys.Public)
	}
	sub := webpushtest.NewSubscriber()
	dev := map[string]any{"platform": "webpush", "endpoint": "https://push.example/abc",
		"keys": map[string]string{"p256dh": sub.P256dh(), "auth": sub.AuthB64()}, "locale": "de"}
	var a, b struct{ ID int64 }
	if st := api(t, srv, 1, "POST", "/v1/devices", dev, &a); st != 201 {
		t.Fatalf("register: %d", st)
	}
	if st := api(t, srv, 1, "POST", "/v1/devices", dev, &b); st != 200 || b.ID != a.ID {
		t.Fatalf("re-register: %d id %d, want 200 and %d", st, b.ID, a.ID)
	}
	var list struct{ Devices []chat.Device }
	api(t, srv, 1, "GET", "/v1/devices", nil, &list)
	if len(list.Devices) != 1 || list.Devices[0].Endpoint != "https://push.example/abc" || list.Devices[0].Locale != "de" {
		t.Fatalf("devices = %+v", list.Devices)
	}
	if st := api(t, srv, 2, "DELETE", fmt.Sprintf("/v1/devices/%d", a.ID), nil, nil); st != 404 {
		t.Errorf("deleting another user's device: %d", st)
	}
	if st := api(t, srv, 1, "DELETE", fmt.Sprintf("/v1/devices/%d", a.ID), nil, nil); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st := api(t, srv, 1, "POST", "/v1/devices", map[string]any{"platform": "fcm", "token": "t"}, nil); st != 400 {
		t.Errorf("fcm without a hand-off: %d, want 400", st)
	}

	conv := mustDirect(t, context.Background(), srv, 1, 2)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var set chat.ConversationSettings
	if st := api(t, srv, 1, "PUT", fmt.Sprintf("/v1/conversations/%d/settings", conv.ID),
		map[string]any{"muted": true, "mutedUntil": until}, &set); st != 200 || !set.Muted || !set.Mentions || !set.MutedUntil.Equal(until) {
		t.Fatalf("settings: %d %+v", st, set)
	}
	if st := api(t, srv, 3, "PUT", fmt.Sprintf("/v1/conversations/%d/settings", conv.ID), map[string]any{"muted": true}, nil); st != 403 {
		t.Errorf("non-member settings: %d, want 403", st)
	}
	var inbox chat.InboxPage
	api(t, srv, 1, "GET", "/v1/inbox", nil, &inbox)
	if len(inbox.Conversations) != 1 || inbox.Conversations[0].Settings == nil || !inbox.Conversations[0].Settings.Muted {
		t.Fatalf("inbox = %+v", inbox.Conversations)
	}
	api(t, srv, 2, "GET", "/v1/inbox", nil, &inbox)
	if s := inbox.Conversations[0].Settings; s == nil || s.Muted || !s.Mentions {
		t.Errorf("the peer's settings = %+v, want the defaults", s)
	}
}

// TestPushesGoToDisconnectedAndStuckRecipientsOnly: in one group, a
// recipient connected and acknowledging gets no push, a disconnected one
// gets one push for the burst within push_delay + 1 s, one connected but
// not acknowledging (a stuck socket) is pushed too, and the sender and a
// member who muted the group get none.
func TestPushesGoToDisconnectedAndStuckRecipientsOnly(t *testing.T) {
	srv, ep := startPushNode(t, nil)
	g, err := srv.Service.CreateGroup(context.Background(), 1, "team", []int64{2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	for u, name := range map[int64]string{1: "sender", 2: "online", 3: "offline", 4: "stuck", 5: "muted"} {
		subscribeDevice(t, srv, ep, u, name)
	}
	if st := api(t, srv, 5, "PUT", fmt.Sprintf("/v1/conversations/%d/settings", g.ID), map[string]any{"muted": true}, nil); st != 200 {
		t.Fatal(st)
	}
	online := rawClient(t, srv.MQTTAddr(), 2, "online-2", 5, true)
	stuck := rawClient(t, srv.MQTTAddr(), 4, "stuck-4", 5, true)
	stuck.AutoAck = false
	go func() {
		for range online.Publishes {
		}
	}()
	go func() {
		for range stuck.Publishes {
		}
	}()
	sender := rawClient(t, srv.MQTTAddr(), 1, "sender-1", 5, true)
	for i := 0; i < 3; i++ {
		if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(newID(), "burst")); err != nil || ack.ReasonCode >= 0x80 {
			t.Fatalf("send: %v %v", err, ack.ReasonCode)
		}
	}
	sent := time.Now()
	got := waitAccepted(t, ep, "offline", 1, 5*time.Second)
	if d := ep.Of("offline")[0].At.Sub(sent); d > 2*time.Second {
		t.Errorf("pushed %v after the burst, want within push_delay + 1 s", d)
	}
	if got[0].Count != 3 || got[0].Seq != 3 || got[0].SenderID != 1 || got[0].Badge != 3 || got[0].Title != "team" || got[0].Body != "" {
		t.Errorf("push = %+v, want one for the burst of 3", got[0])
	}
	waitAccepted(t, ep, "stuck", 1, 3*time.Second)
	time.Sleep(1500 * time.Millisecond) // past the delay and the interval once more
	for name, want := range map[string]int{"online": 0, "sender": 0, "muted": 0, "offline": 1, "stuck": 1} {
		if n := len(ep.Of(name)); n != want {
			t.Errorf("%s: %d pushes, want %d", name, n, want)
		}
	}
}

// TestTwoNodesPushOnceAlthoughBothSeeEveryMessage: two nodes share a
// database and Kafka; messages sent through both are pushed once each.
func TestTwoNodesPushOnceAlthoughBothSeeEveryMessage(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	keys := newVAPID(t)
	kafka := startKafka(t)
	env := pushEnv(t, keys, map[string]string{"CHAT_KAFKA_BROKERS": kafka})
	a := startNode(t, url, withNodeID(env, "a"))
	b := startNode(t, url, withNodeID(env, "b"))
	ep := webpushtest.NewEndpoint(keys.Public)
	t.Cleanup(ep.Close)
	subscribeDevice(t, a, ep, 2, "bob")
	conv := mustDirect(t, context.Background(), a, 1, 2)
	ca := rawClient(t, a.MQTTAddr(), 1, "alice-a", 5, true)
	cb := rawClient(t, b.MQTTAddr(), 1, "alice-b", 5, true)
	for i := 0; i < 6; i++ {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		if _, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitAccepted(t, ep, "bob", 1, 5*time.Second)
	time.Sleep(2500 * time.Millisecond)
	got := waitAccepted(t, ep, "bob", 1, time.Second)
	counted := 0
	var seqs []int64
	for _, n := range got {
		counted += n.Count
		seqs = append(seqs, n.Seq)
	}
	if counted != 6 || !slices.IsSorted(seqs) || seqs[len(seqs)-1] != 6 {
		t.Errorf("pushes %+v cover %d messages, want each of 6 exactly once", got, counted)
	}
}

// TestKilledDecidingNodesPushIsSentByAnother: the node that leads the
// decider is killed with SIGKILL while its push hangs at the push
// service; another node sends it after the claim's lease, at most once
// more.
func TestKilledDecidingNodesPushIsSentByAnother(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	keys := newVAPID(t)
	ep := webpushtest.NewEndpoint(keys.Public)
	t.Cleanup(ep.Close)
	bin := buildChatd(t)
	aAddr := testkit.FreeAddr(t)
	proc := startProcess(t, bin, aAddr, nil, "CHAT_DATABASE_URL="+url, "CHAT_DATA_DIR="+t.TempDir(), "CHAT_LOG_LEVEL=error",
		"CHAT_PUSH_DELAY=500ms", "CHAT_PUSH_ALLOW_HTTP=true", "CHAT_PUSH_TIMEOUT=1s", "CHAT_VAPID_PRIVATE_KEY="+keys.Private)
	// Node B starts second: A holds the decider lease.
	b := startNode(t, url, pushEnv(t, keys, map[string]string{"CHAT_PUSH_DELAY": "500ms", "CHAT_PUSH_TIMEOUT": "1s"}))
	subscribeDevice(t, b, ep, 2, "bob")
	ep.Hang("bob", true)
	conv := mustDirect(t, context.Background(), b, 1, 2)
	c := rawClient(t, aAddr, 1, "alice", 5, true)
	if _, err := c.Publish(testnode.MsgTopic(conv.ID), 1, testnode.SendPayload(newID(), "hello")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "node A's push to reach the endpoint", func() bool { return len(ep.Pushes()) > 0 })
	_ = proc.Process.Kill() // SIGKILL: A's claim is left to expire
	_ = proc.Wait()
	ep.Hang("bob", false)
	got := waitAccepted(t, ep, "bob", 1, 20*time.Second)
	if got[0].Seq != 1 || got[0].Count != 1 {
		t.Errorf("push = %+v", got[0])
	}
	time.Sleep(2 * time.Second)
	if n := len(ep.Pushes()); n > 2 {
		t.Errorf("%d requests for one push, want at most the killed attempt and one more", n)
	}
}

// TestHangingPushServiceDoesNotSlowSends: with every recipient's push
// service hanging, a 1,000-message burst is acknowledged as fast as
// without devices (p99 PUBACK within noise). Each side is the better of
// two bursts: a slowdown the hanging pushes cause shows in both, a load
// spike of the machine's other work (a browser test beside it) in one.
func TestHangingPushServiceDoesNotSlowSends(t *testing.T) {
	srv, ep := startPushNode(t, map[string]string{"CHAT_PUSH_DELAY": "100ms", "CHAT_PUSH_MIN_INTERVAL": "100ms",
		"CHAT_PUSH_TIMEOUT": "30s", "CHAT_PUSH_QUEUE_SIZE": "50"})
	var convs []int64
	for u := int64(2); u <= 41; u++ {
		c := mustDirect(t, context.Background(), srv, 1, u)
		convs = append(convs, c.ID)
	}
	sender := rawClient(t, srv.MQTTAddr(), 1, "sender", 5, true)
	go func() {
		for range sender.Publishes {
		}
	}()
	burst := func() time.Duration {
		lat := make([]time.Duration, 0, 1000)
		for i := 0; i < 1000; i++ {
			t0 := time.Now()
			if ack, err := sender.Publish(testnode.MsgTopic(convs[i%len(convs)]), 1, testnode.SendPayload(newID(), "x")); err != nil || ack.ReasonCode >= 0x80 {
				t.Fatalf("send %d: %v", i, err)
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)*99/100]
	}
	base := min(burst(), burst())
	for u := int64(2); u <= 41; u++ {
		name := fmt.Sprint("u", u)
		subscribeDevice(t, srv, ep, u, name)
		ep.Hang(name, true)
	}
	// A message each; their pushes take every worker and fill the queue.
	for _, c := range convs {
		if _, err := sender.Publish(testnode.MsgTopic(c), 1, testnode.SendPayload(newID(), "x")); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "pushes hanging", func() bool { return len(ep.Pushes()) >= 30 })
	hanging := min(burst(), burst())
	t.Logf("p99 PUBACK: %v without devices, %v with every push service hanging (%d requests hanging)", base, hanging, len(ep.Pushes()))
	if hanging > 3*base+50*time.Millisecond {
		t.Errorf("p99 PUBACK %v with hanging push services, %v without", hanging, base)
	}
}

// TestDeviceRPCTwinsAnswerLikeHTTP registers, lists and deletes a device
// and mutes a conversation over MQTT v5 RPC.
func TestDeviceRPCTwinsAnswerLikeHTTP(t *testing.T) {
	t.Parallel()
	keys := newVAPID(t)
	srv, conv := startDirect(t, pushEnv(t, keys, nil))
	c := rawClient(t, srv.MQTTAddr(), 1, "rpc-push", 5, true)
	if codes, err := c.Subscribe("chat/v1/user/1/rpc"); err != nil || codes[0] >= 0x80 {
		t.Fatalf("subscribe rpc: %v %v", codes, err)
	}
	n := 0
	call := func(method, payload string) map[string]any {
		t.Helper()
		n++
		corr := []byte(fmt.Sprint("c", n))
		if ack, err := c.Publish("chat/v1/rpc/"+method, 1, []byte(payload),
			mqtttest.PublishOpts{ResponseTopic: "chat/v1/user/1/rpc", CorrelationData: corr}); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("%s: 0x%02x %v", method, ack.ReasonCode, err)
		}
		pk := nextReply(t, c, method+"'s reply", 5*time.Second, corr)
		var out map[string]any
		if err := json.Unmarshal(pk.Payload, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	sub := webpushtest.NewSubscriber()
	reg := call("device.register", fmt.Sprintf(`{"platform":"webpush","endpoint":"https://push.example/rpc","keys":{"p256dh":%q,"auth":%q}}`, sub.P256dh(), sub.AuthB64()))
	if reg["status"] != 201.0 || reg["id"] == nil {
		t.Fatalf("device.register: %v", reg)
	}
	if again := call("device.register", fmt.Sprintf(`{"platform":"webpush","endpoint":"https://push.example/rpc","keys":{"p256dh":%q,"auth":%q}}`, sub.P256dh(), sub.AuthB64())); again["status"] != 200.0 || again["id"] != reg["id"] {
		t.Errorf("re-register: %v", again)
	}
	if l := call("device.list", `{}`); l["status"] != 200.0 || len(l["devices"].([]any)) != 1 {
		t.Errorf("device.list: %v", l)
	}
	if v := call("push.vapid", `{}`); v["publicKey"] != keys.Public {
		t.Errorf("push.vapid: %v", v)
	}
	if s := call("conversation.settings", fmt.Sprintf(`{"conversationId":%d,"muted":true}`, conv.ID)); s["status"] != 200.0 || s["muted"] != true {
		t.Errorf("conversation.settings: %v", s)
	}
	if d := call("device.delete", fmt.Sprintf(`{"id":%v}`, reg["id"])); d["status"] != 204.0 {
		t.Errorf("device.delete: %v", d)
	}
	if d := call("device.delete", fmt.Sprintf(`{"id":%v}`, reg["id"])); d["status"] != 404.0 {
		t.Errorf("second device.delete: %v", d)
	}
}

// TestRecalledMessageIsTakenOffTheDevicesItWasPushedTo: a message sent
// over MQTT is pushed with its preview to the offline recipient; its
// sender's edit and a reaction push nothing; the sender's recall over
// HTTP sends that device a silent remove and the sender's own device
// nothing.
func TestRecalledMessageIsTakenOffTheDevicesItWasPushedTo(t *testing.T) {
	t.Parallel()
	srv, ep := startPushNode(t, map[string]string{"CHAT_PUSH_PREVIEW": "true"})
	g, err := srv.Service.CreateGroup(context.Background(), 1, "team", []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	subscribeDevice(t, srv, ep, 1, "alice")
	subscribeDevice(t, srv, ep, 2, "bob")
	alice := rawClient(t, srv.MQTTAddr(), 1, "alice-1", 5, true)
	carol := rawClient(t, srv.MQTTAddr(), 3, "carol-3", 5, true)
	go func() {
		for range alice.Publishes {
		}
	}()
	go func() {
		for range carol.Publishes {
		}
	}()
	if ack, err := alice.Publish(testnode.MsgTopic(g.ID), 1, testnode.SendPayload(newID(), "wrong group")); err != nil || ack.ReasonCode >= 0x80 {
		t.Fatalf("send: %v %v", err, ack.ReasonCode)
	}
	got := waitAccepted(t, ep, "bob", 1, 5*time.Second)
	if got[0].Type != push.TypeMessage || got[0].Seq != 1 || got[0].Body != "wrong group" {
		t.Fatalf("push = %+v", got[0])
	}
	if ack, err := alice.Publish(changeTopic(g.ID, "edit"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"body":"wrong group!"}`, newID())); err != nil || ack.ReasonCode >= 0x80 {
		t.Fatalf("edit: %v %v", err, ack.ReasonCode)
	}
	if ack, err := carol.Publish(changeTopic(g.ID, "react"), 1, fmt.Appendf(nil, `{"clientMsgId":%q,"seq":1,"emoji":"😬","on":true}`, newID())); err != nil || ack.ReasonCode >= 0x80 {
		t.Fatalf("react: %v %v", err, ack.ReasonCode)
	}
	// The edit replaces the text bob's notification shows, silently (a
	// preview is on); the reaction pushes nothing.
	got = waitAccepted(t, ep, "bob", 2, 5*time.Second)
	if n := got[1]; n.Type != push.TypeUpdate || n.Seq != 1 || n.Body != "wrong group!" || n.Title != "" {
		t.Errorf("after the edit: %+v, want a silent update of seq 1 with the edited text", n)
	}
	stillAccepted(t, ep, "bob", 2, 2500*time.Millisecond) // past push_delay and push_min_interval
	var rc struct{ Seq, TargetSeq int64 }
	if st := api(t, srv, 1, "DELETE", fmt.Sprintf("/v1/conversations/%d/messages/1", g.ID), nil, &rc); st != http.StatusOK || rc.TargetSeq != 1 {
		t.Fatalf("recall: %d %+v", st, rc)
	}
	got = waitAccepted(t, ep, "bob", 3, 5*time.Second)
	if n := got[2]; n.Type != push.TypeRemove || n.ConversationID != g.ID || n.Seq != 1 || n.Body != "" || n.Title != "" {
		t.Errorf("after the recall: %+v, want a silent remove of seq 1", n)
	}
	stillAccepted(t, ep, "bob", 3, 1500*time.Millisecond)
	stillAccepted(t, ep, "alice", 0, 0)
}

// stillAccepted fails as soon as subscription name has more than n
// accepted pushes, watching for d.
func stillAccepted(t *testing.T, ep *webpushtest.Endpoint, name string, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if got := ep.Of(name); len(got) > n {
			t.Fatalf("%s: %d pushes, want %d: last %s", name, len(got), n, got[len(got)-1].Plaintext)
		}
		if !time.Now().Before(deadline) {
			return
		}
		select {
		case <-ep.Notify():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A mute for a while ends: once mutedUntil has passed, the inbox shows the
// conversation unmuted (muted false, mutedUntil null), as pushes treat
// it; before, it kept saying muted with a time gone by, and each client
// had to work out that it was not. A mute until a time already gone is
// refused (400): it would mute nothing.
func TestAMuteForAWhileShowsAsOverOnceItsTimeHasPassed(t *testing.T) {
	t.Parallel()
	srv, _ := startPushNode(t, nil)
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	path := fmt.Sprintf("/v1/conversations/%d/settings", conv.ID)
	if r := httpDo(t, srv, 1, "PUT", path, map[string]any{"muted": true, "mutedUntil": time.Now().Add(-time.Minute)}); r.status != 400 || errCode(r) != "invalid" {
		t.Fatalf("a mute until a minute ago: %d %s, want 400 invalid", r.status, r.body)
	}
	until := time.Now().Add(1500 * time.Millisecond)
	var set chat.ConversationSettings
	if st := api(t, srv, 1, "PUT", path, map[string]any{"mutedUntil": until}, &set); st != 200 || !set.Muted {
		t.Fatalf("a mute for 1.5 s: %d %+v", st, set)
	}
	var inbox chat.InboxPage
	api(t, srv, 1, "GET", "/v1/inbox", nil, &inbox)
	if s := inbox.Conversations[0].Settings; s == nil || !s.Muted {
		t.Fatalf("while muted, the inbox says %+v", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		api(t, srv, 1, "GET", "/v1/inbox", nil, &inbox)
		s := inbox.Conversations[0].Settings
		if time.Now().After(until.Add(100 * time.Millisecond)) {
			if s == nil || s.Muted || s.MutedUntil != nil || !s.Mentions {
				t.Fatalf("after the mute's time, the inbox says %+v, want muted false, mutedUntil null", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mute never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
