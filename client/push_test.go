package client_test

import (
	"errors"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/internal/webpushtest"
)

// A conversation's mute over the Go client: the settings set are answered
// and shown by the inbox, an unmute puts the defaults back, a
// non-member's is ErrNotMember and a mute that ended already ErrInvalid.
func TestConversationSettingsOverTheGoClient(t *testing.T) {
	t.Parallel()
	_, broker, a, conv := sender(t)
	stranger := connect(t, testConfig(t, broker, 3))
	ctx := ctxFor(t, 30*time.Second)

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	st, err := a.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{MutedUntil: &until, Mentions: new(false)})
	if err != nil || !st.Muted || st.Mentions || st.MutedUntil == nil || !st.MutedUntil.Equal(until) {
		t.Fatalf("mute until %v: %+v, %v", until, st, err)
	}
	page, err := a.Inbox(ctx, client.InboxOptions{})
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].Settings == nil || !page.Conversations[0].Settings.Muted {
		t.Fatalf("the inbox's settings of a muted conversation: %+v, %v", page, err)
	}
	st, err = a.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{Muted: new(false)})
	if err != nil || st != chat.DefaultConversationSettings {
		t.Fatalf("unmute: %+v, %v", st, err)
	}

	if _, err := stranger.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{Muted: new(true)}); !errors.Is(err, client.ErrNotMember) {
		t.Fatalf("a non-member mutes: %v, want ErrNotMember", err)
	}
	past := time.Now().Add(-time.Minute)
	_, err = a.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{MutedUntil: &past})
	var ce *client.Error
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &ce) || ce.Code != "invalid" {
		t.Fatalf("a mute that ended: %v, want ErrInvalid (invalid)", err)
	}
}

// startWebPushNode starts a node that sends Web Push with a VAPID key of
// its own, and answers its broker and the key's public half.
func startWebPushNode(t *testing.T) (broker, vapidPublic string) {
	t.Helper()
	keys, err := push.LoadOrCreateVAPID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{"CHAT_VAPID_PRIVATE_KEY": keys.Private}), nil)
	return "mqtt://" + srv.MQTTAddr(), keys.Public
}

// webPushDevice is the registration of a browser's Web Push subscription
// at endpoint.
func webPushDevice(endpoint string) client.DeviceRegistration {
	sub := webpushtest.NewSubscriber()
	return client.DeviceRegistration{Platform: client.PlatformWebPush, Endpoint: endpoint,
		Keys: &client.DeviceKeys{P256dh: sub.P256dh(), Auth: sub.AuthB64()}}
}

// Push devices over the Go client: VAPIDPublicKey is the node's key, a
// Web Push subscription registers (again: the same id, not created),
// Devices lists it without its keys, another user's DeleteDevice of it is
// ErrNotFound and the owner's removes it; an fcm token on a server with no
// sender for it is ErrInvalid.
func TestPushDevicesOverTheGoClient(t *testing.T) {
	t.Parallel()
	broker, vapidPublic := startWebPushNode(t)
	a := connect(t, testConfig(t, broker, 1))
	b := connect(t, testConfig(t, broker, 2))
	ctx := ctxFor(t, 30*time.Second)

	if k, err := a.VAPIDPublicKey(ctx); err != nil || k != vapidPublic {
		t.Fatalf("VAPIDPublicKey: %q, %v; want %q", k, err, vapidPublic)
	}
	reg := webPushDevice("https://push.example/abc")
	reg.Locale = "de"
	id, created, err := a.RegisterDevice(ctx, reg)
	if err != nil || id == 0 || !created {
		t.Fatalf("RegisterDevice: id %d created %v, %v", id, created, err)
	}
	if again, created, err := a.RegisterDevice(ctx, reg); err != nil || again != id || created {
		t.Fatalf("RegisterDevice again: id %d created %v, %v; want id %d, not created", again, created, err, id)
	}
	ds, err := a.Devices(ctx)
	if err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].Endpoint != reg.Endpoint || ds[0].Locale != "de" {
		t.Fatalf("Devices: %+v, %v", ds, err)
	}
	if err := b.DeleteDevice(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("another user's DeleteDevice: %v, want ErrNotFound", err)
	}
	if err := a.DeleteDevice(ctx, id); err != nil {
		t.Fatalf("DeleteDevice: %v", err)
	}
	if ds, err := a.Devices(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("Devices after DeleteDevice: %+v, %v", ds, err)
	}
	if _, _, err := a.RegisterDevice(ctx, client.DeviceRegistration{Platform: client.PlatformFCM, Token: "t"}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an fcm token without a sender: %v, want ErrInvalid", err)
	}
}

// TestADeviceDeletionWhoseReplyWasLostIsAskedAgain: device.delete was
// never asked again, so a sign-out's DeleteDevice whose connection ended
// before its reply failed with ErrUnavailable though the device was gone.
// It is asked again now, and the repeat's ErrNotFound is the success.
func TestADeviceDeletionWhoseReplyWasLostIsAskedAgain(t *testing.T) {
	t.Parallel()
	broker, _ := startWebPushNode(t)
	a := connect(t, testConfig(t, broker, 1))
	ctx := ctxFor(t, 30*time.Second)
	id, _, err := a.RegisterDevice(ctx, webPushDevice("https://push.example/abc"))
	if err != nil {
		t.Fatal(err)
	}
	loseNextReply(a)
	if err := a.DeleteDevice(ctx, id); err != nil {
		t.Fatalf("DeleteDevice whose reply was lost: %v", err)
	}
	if ds, err := a.Devices(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("Devices after DeleteDevice: %+v, %v", ds, err)
	}
}
