package push_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/webpushtest"
)

func TestSignatureVerifiesAndRejectsTamperingAndReplays(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("s", 32))
	body := []byte(`{"id":"1-2"}`)
	now := time.Now()
	sig := push.Sign(secret, now, body)
	if err := push.Verify(secret, sig, body, now, 5*time.Minute); err != nil {
		t.Fatalf("fresh signature: %v", err)
	}
	for name, c := range map[string]struct {
		sig  string
		body string
		at   time.Time
	}{
		"tampered body": {sig, `{"id":"1-3"}`, now},
		"wrong secret":  {push.Sign([]byte(strings.Repeat("x", 32)), now, body), string(body), now},
		"replayed late": {sig, string(body), now.Add(6 * time.Minute)},
		"malformed":     {"v1=abc", string(body), now},
	} {
		if err := push.Verify(secret, c.sig, []byte(c.body), c.at, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestNotificationNeverExceedsTheLimit(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Preview = true })
	// Control characters escape to six bytes each in JSON.
	r.send(conv, 1, strings.Repeat("\x01", 10000))
	for _, p := range r.ep.Of("bob") {
		if len(p.Plaintext) > push.MaxPayloadBytes {
			t.Errorf("payload of %d bytes", len(p.Plaintext))
		}
	}
	got := r.waitPushes("bob", 1, 3*time.Second)
	if got[0].Body == "" || len(r.ep.Of("bob")[0].Plaintext) > push.MaxPayloadBytes {
		t.Errorf("payload %d bytes, body %d", len(r.ep.Of("bob")[0].Plaintext), len(got[0].Body))
	}
}

// sender is a loopback webhook receiver that verifies signatures.
type sender struct {
	secret []byte
	mu     sync.Mutex
	reqs   []push.Request
	status []int
}

func (s *sender) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := push.Verify(s.secret, r.Header.Get(push.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var req push.Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	code := http.StatusAccepted
	if len(s.status) > 0 {
		code, s.status = s.status[0], s.status[1:]
	}
	s.mu.Unlock()
	w.WriteHeader(code)
}

func (s *sender) got() []push.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]push.Request(nil), s.reqs...)
}

// startOutputs starts what the FCM and APNs pushes leave chatd through:
// kfake with a chat.push topic of partitions, and a receiver of the signed
// webhook answering as startWebhook's with status. It returns both and the
// Config change that points a rig at them.
func startOutputs(t *testing.T, partitions int32, status ...int) (*kfake.Cluster, *sender, func(*push.Config)) {
	t.Helper()
	kc := kafkatest.Start(t, kfake.SeedTopics(partitions, "chat.push"))
	snd, webhook := startWebhook(t, status...)
	return kc, snd, func(c *push.Config) {
		c.KafkaBrokers, c.KafkaTopic = kc.ListenAddrs(), "chat.push"
		webhook(c)
	}
}

// startWebhook starts a receiver of the signed webhook that answers its
// first requests with status, in turn, and the others 202. It returns the
// receiver and the Config change that points a rig at it.
func startWebhook(t *testing.T, status ...int) (*sender, func(*push.Config)) {
	t.Helper()
	snd := &sender{secret: []byte(strings.Repeat("k", 32)), status: status}
	hook := httptest.NewServer(snd)
	t.Cleanup(hook.Close)
	return snd, func(c *push.Config) { c.WebhookURL, c.WebhookSecret = hook.URL, string(snd.secret) }
}

// registerHandedOff registers user's FCM or APNs device, as a node that
// hands such pushes off registers it, and answers its id.
func registerHandedOff(t *testing.T, r *rig, user int64, req chat.DeviceRequest) int64 {
	t.Helper()
	id, _, err := push.NewDevices(r.pool, r.keys.Public, false, true).RegisterDevice(context.Background(), user, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestFCMAndAPNsPushesGoToKafkaAndTheSignedWebhook(t *testing.T) {
	t.Parallel()
	kc, snd, outputs := startOutputs(t, 3)
	r := newRig(t)
	r.start(outputs)
	ctx := context.Background()
	fcm := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token", AppID: "com.example.chat", Locale: "de"})
	apns := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "apns", Token: "abcdef0123", AppID: "com.example.chat"})
	conv := r.direct(1, 2)
	r.send(conv, 1, "hi")

	deadline := time.Now().Add(5 * time.Second)
	for len(snd.got()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("webhook got %d requests", len(snd.got()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	byDevice := map[int64]push.Request{}
	for _, q := range snd.got() {
		byDevice[q.Device.ID] = q
	}
	if q := byDevice[fcm]; q.Device.Token != "fcm-token" || q.Device.Platform != "fcm" || q.Device.Locale != "de" || q.UserID != 2 ||
		q.Notification.ConversationID != conv || q.Notification.Seq != 1 || q.CollapseKey == "" || q.ID == "" {
		t.Errorf("fcm request = %+v", q)
	}
	if q := byDevice[apns]; q.Device.Token != "abcdef0123" || q.Device.AppID != "com.example.chat" {
		t.Errorf("apns request = %+v", q)
	}

	recs, err := kafkatest.ReadTopic(ctx, kc.ListenAddrs()[0], "chat.push", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("chat.push has %d records, want 2", len(recs))
	}
	for _, rec := range recs {
		var q push.Request
		if err := json.Unmarshal(rec.Value, &q); err != nil {
			t.Fatal(err)
		}
		if string(rec.Key) != strconv.FormatInt(q.UserID, 10) || q.UserID != 2 {
			t.Errorf("record key %q for user %d", rec.Key, q.UserID)
		}
	}
}

func TestWebhookGoneDeletesTheDevice(t *testing.T) {
	t.Parallel()
	_, webhook := startWebhook(t, http.StatusGone)
	r := newRig(t)
	r.start(webhook)
	id := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "stale"})
	r.send(r.direct(1, 2), 1, "hi")
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_device WHERE id = $1`, id) // deleted after the 410
}

// The webhook answers for the operator's sender: 410 is its word for a
// dead token. A 404 is its own URL not found (a wrong path, a proxy
// without the route): that push failed, and no device is deleted, or a
// misconfigured webhook would forget every FCM and APNs device it is
// sent a push for.
func TestAWebhookAnswering404KeepsTheDevice(t *testing.T) {
	t.Parallel()
	snd, webhook := startWebhook(t, http.StatusNotFound)
	r := newRig(t)
	r.start(webhook)
	id := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fine"})
	r.send(r.direct(1, 2), 1, "hi")
	deadline := time.Now().Add(5 * time.Second)
	for len(snd.got()) == 0 || r.count(`SELECT count(*) FROM push_job`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the push was not done (%d requests)", len(snd.got()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.count(`SELECT count(*) FROM push_device WHERE id = $1`, id) != 1 {
		t.Fatal("the device was deleted because the webhook's URL answered 404")
	}
}

func TestWebPushCarriesAVAPIDJWTOfTheServerKey(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) { c.VAPIDSubject = "mailto:ops@example.com" })
	r.subscribe(2, "bob")
	r.send(r.direct(1, 2), 1, "hi")
	r.waitPushes("bob", 1, 3*time.Second)
	p := r.ep.Of("bob")[0]
	sub, err := webpushtest.VerifyVAPID(p.Header.Get("Authorization"), r.keys.Public, r.ep.Server.URL)
	if err != nil || sub != "mailto:ops@example.com" {
		t.Errorf("VAPID JWT: sub %q, %v", sub, err)
	}
	other, _ := push.LoadOrCreateVAPID(t.TempDir())
	if _, err := webpushtest.VerifyVAPID(p.Header.Get("Authorization"), other.Public, r.ep.Server.URL); err == nil {
		t.Error("the JWT verified against another key")
	}
	if _, err := webpushtest.VerifyVAPID(p.Header.Get("Authorization"), "", "https://elsewhere.example"); err == nil {
		t.Error("the JWT verified for another audience")
	}
	if p.Header.Get("TTL") == "" || p.Header.Get("Topic") == "" || p.Header.Get("Urgency") != "high" {
		t.Errorf("headers: TTL %q Topic %q Urgency %q", p.Header.Get("TTL"), p.Header.Get("Topic"), p.Header.Get("Urgency"))
	}
}

// TestFCMAndAPNsNotificationNeverExceedsTheLimit: the notification handed
// to the operator's sender (Kafka and webhook) is within MaxPayloadBytes
// as docs/events.md promises, as a Web Push payload is: escaping a long
// preview must not take it past APNs' and FCM's 4 KB.
func TestFCMAndAPNsNotificationNeverExceedsTheLimit(t *testing.T) {
	t.Parallel()
	kc, snd, outputs := startOutputs(t, 1)
	r := newRig(t)
	r.start(func(c *push.Config) { outputs(c); c.Preview = true })
	ctx := context.Background()
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "apns", Token: "abcdef0123"})
	// Control characters escape to six bytes each in JSON.
	r.send(r.direct(1, 2), 1, strings.Repeat("\x01", 10000))
	deadline := time.Now().Add(5 * time.Second)
	for len(snd.got()) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("webhook got %d requests", len(snd.got()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if q := snd.got()[0]; q.Notification.Body == "" {
		t.Errorf("notification %+v has no preview left", q.Notification)
	}
	recs, err := kafkatest.ReadTopic(ctx, kc.ListenAddrs()[0], "chat.push", 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("chat.push: %d records, %v", len(recs), err)
	}
	var q struct {
		Notification json.RawMessage `json:"notification"`
	}
	if err := json.Unmarshal(recs[0].Value, &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Notification) > push.MaxPayloadBytes {
		t.Errorf("notification of %d bytes, over %d", len(q.Notification), push.MaxPayloadBytes)
	}
}

// A stopped pusher leaves nothing of its Kafka output behind: no
// connection to Kafka and no goroutine of kafka-go's (its metadata
// refresh would otherwise poll the brokers for as long as the process
// lives).
func TestAStoppedPusherLeavesNoKafkaConnectionOrGoroutine(t *testing.T) {
	kc, snd, outputs := startOutputs(t, 1)
	before := kafkatest.Goroutines()
	r := newRig(t)
	stop := r.start(outputs)
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token", AppID: "com.example.chat"})
	r.send(r.direct(1, 2), 1, "hi")
	testkit.WaitFor(t, 5*time.Second, "the push handed off", func() bool { return len(snd.got()) == 1 })
	recs, err := kafkatest.ReadTopic(context.Background(), kc.ListenAddrs()[0], "chat.push", 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("chat.push has %d records (%v), want 1", len(recs), err)
	}
	stop()
	testkit.WaitFor(t, 5*time.Second, "kafka-go's goroutines gone", func() bool { return kafkatest.Goroutines() <= before })
}

// With both outputs configured, a push to a device Kafka accepted and the
// webhook then refused for good (a 4xx) is not retried (the webhook's
// answer stands), but Kafka's consumer has it and may have shown it: the
// job is kept as the pair's shown notification, as one sent is, so that a
// recall of its message sends the device a remove.
func TestAPushKafkaAcceptedAndTheWebhookRefusedIsKeptAsShown(t *testing.T) {
	t.Parallel()
	_, snd, outputs := startOutputs(t, 1, http.StatusBadRequest)
	r := newRig(t)
	r.start(outputs)
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token"})
	r.send(r.direct(1, 2), 1, "hi")
	testkit.WaitFor(t, 5*time.Second, "the push to reach the webhook", func() bool { return len(snd.got()) > 0 })
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if n := len(snd.got()); n != 1 {
		t.Fatalf("the webhook got %d requests, want the one it refused", n)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sent'`); n != 1 {
		t.Fatalf("%d of bob's pushes kept as shown, want the one Kafka accepted", n)
	}
}

// With both outputs configured, a push Kafka accepted and the webhook
// asked to retry (a 5xx) is retried to the webhook alone: Kafka's
// consumer gets each push once, and the webhook until it accepts.
func TestAPushKafkaAcceptedIsRetriedToTheWebhookAlone(t *testing.T) {
	t.Parallel()
	kc, snd, outputs := startOutputs(t, 1, http.StatusServiceUnavailable)
	r := newRig(t)
	r.start(outputs)
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token"})
	r.send(r.direct(1, 2), 1, "hi")
	testkit.WaitFor(t, 10*time.Second, "the webhook to accept the retry", func() bool { return len(snd.got()) == 2 })
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	recs, err := kafkatest.ReadTopic(context.Background(), kc.ListenAddrs()[0], "chat.push", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("chat.push has %d records of the push, want 1", len(recs))
	}
}

// TestAPushKafkaAcceptedBeforeAStopCutItsWebhookSendIsKeptAsShown: Kafka
// took a push, and the node stopped while the webhook had not answered
// (its send cancelled: no attempt). Kafka's consumer has the push and may
// have shown it: when the next claim finds it read and sends nothing, it
// is kept as the pair's shown notification, so that a recall removes it.
func TestAPushKafkaAcceptedBeforeAStopCutItsWebhookSendIsKeptAsShown(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t, kfake.SeedTopics(1, "chat.push"))
	hook := &hangingHook{arrived: make(chan struct{})}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	outputs := func(c *push.Config) {
		c.KafkaBrokers, c.KafkaTopic = kc.ListenAddrs(), "chat.push"
		c.WebhookURL, c.WebhookSecret, c.Timeout = srv.URL, "secret-secret-secret-secret-1234", 5*time.Second
	}
	r := newRig(t)
	stop := r.start(outputs)
	registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "fcm", Token: "fcm-token"})
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "hi")
	testkit.Receive(t, hook.arrived, 5*time.Second, "the push never reached the webhook")
	stop()
	r.ack(conv, 2, seq)
	r.start(outputs)
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
	if n := r.count(`SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sent'`); n != 1 {
		t.Fatalf("bob's push Kafka took before the stop, found read by the next claim: %d kept as sent, want 1 (a recall must remove it)\n%s", n, dumpJobs(r))
	}
}
