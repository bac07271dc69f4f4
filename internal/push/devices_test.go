package push_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/webpushtest"
)

func webDevice(endpoint string) chat.DeviceRequest {
	s := webpushtest.NewSubscriber()
	return chat.DeviceRequest{Platform: "webpush", Endpoint: endpoint, Keys: &chat.DeviceKeys{P256dh: s.P256dh(), Auth: s.AuthB64()}}
}

func TestReRegisteringATokenUpdatesItAndAnotherUserTakesItOver(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	d := push.NewDevices(r.pool, r.keys.Public, false, true)
	ctx := context.Background()
	id, created, err := d.RegisterDevice(ctx, 1, chat.DeviceRequest{Platform: "fcm", Token: "tok-1", AppID: "com.example", Locale: "de"}, nil)
	if err != nil || !created {
		t.Fatalf("register: %v created=%v", err, created)
	}
	id2, created, err := d.RegisterDevice(ctx, 1, chat.DeviceRequest{Platform: "fcm", Token: "tok-1", Locale: "fr"}, nil)
	if err != nil || created || id2 != id {
		t.Fatalf("re-register: id %d (first %d) created=%v err=%v", id2, id, created, err)
	}
	ds, _ := d.Devices(ctx, 1)
	if len(ds) != 1 || ds[0].Locale != "fr" || ds[0].Token != "tok-1" {
		t.Fatalf("devices = %+v", ds)
	}
	// The phone changed hands.
	if id3, _, err := d.RegisterDevice(ctx, 2, chat.DeviceRequest{Platform: "fcm", Token: "tok-1"}, nil); err != nil || id3 != id {
		t.Fatalf("takeover: %d %v", id3, err)
	}
	if ds, _ := d.Devices(ctx, 1); len(ds) != 0 {
		t.Errorf("user 1 still has %+v", ds)
	}
	if err := d.DeleteDevice(ctx, 1, id); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("deleting another user's device: %v, want not_found", err)
	}
	if err := d.DeleteDevice(ctx, 2, id); err != nil {
		t.Errorf("delete: %v", err)
	}
}

func TestAUserKeepsTheTwentyNewestDevices(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	var first int64
	for i := 0; i <= chat.MaxDevicesPerUser; i++ {
		id, _, err := r.devices.RegisterDevice(ctx, 7, webDevice(fmt.Sprintf("https://push.example/%d", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = id
		}
	}
	ds, _ := r.devices.Devices(ctx, 7)
	if len(ds) != chat.MaxDevicesPerUser {
		t.Fatalf("%d devices, want %d", len(ds), chat.MaxDevicesPerUser)
	}
	for _, d := range ds {
		if d.ID == first {
			t.Error("the oldest device was kept")
		}
	}
}

func TestRegistrationsAreValidated(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	strict := push.NewDevices(r.pool, r.keys.Public, false, false)
	good := webDevice("https://push.example/x")
	for name, req := range map[string]chat.DeviceRequest{
		"unknown platform":   {Platform: "pager", Token: "x"},
		"http endpoint":      webDevice("http://push.example/x"),
		"relative endpoint":  webDevice("/x"),
		"no keys":            {Platform: "webpush", Endpoint: "https://push.example/x"},
		"bad p256dh":         {Platform: "webpush", Endpoint: "https://push.example/x", Keys: &chat.DeviceKeys{P256dh: "AAAA", Auth: good.Keys.Auth}},
		"short auth":         {Platform: "webpush", Endpoint: "https://push.example/x", Keys: &chat.DeviceKeys{P256dh: good.Keys.P256dh, Auth: "AAAA"}},
		"token on webpush":   {Platform: "webpush", Token: "t", Endpoint: "https://push.example/x", Keys: good.Keys},
		"fcm without token":  {Platform: "fcm"},
		"fcm without sender": {Platform: "fcm", Token: "t"},
		"bad locale":         {Platform: "webpush", Endpoint: "https://push.example/x", Keys: good.Keys, Locale: "de;DROP"},
	} {
		if _, _, err := strict.RegisterDevice(context.Background(), 1, req, nil); chat.ErrorCode(err) != chat.CodeInvalid {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if _, _, err := strict.RegisterDevice(context.Background(), 1, good, nil); err != nil {
		t.Errorf("valid subscription: %v", err)
	}
}

func TestSettingsNeedMembership(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	conv := r.group(1, 2)
	ctx := context.Background()
	if _, err := r.devices.SetSettings(ctx, conv, 3, chat.DefaultConversationSettings); !errors.Is(err, chat.ErrNotMember) {
		t.Errorf("non-member: %v", err)
	}
	r.settings(conv, 2, chat.ConversationSettings{Muted: true})
	m, err := r.devices.Settings(ctx, 2, []int64{conv})
	if err != nil || !m[conv].Muted || m[conv].Mentions {
		t.Errorf("settings = %+v, %v", m, err)
	}
	// Leaving the conversation forgets them.
	if err := r.store.RemoveMember(ctx, conv, 2, 2); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT count(*) FROM member_settings WHERE user_id = 2`); n != 0 {
		t.Errorf("%d settings rows left after leaving", n)
	}
}

// A member who mutes a group at the moment an admin removes them: the
// removal forgets their settings, and the mute must not be written after
// it (a row outliving the membership would mute the group again for them,
// silently, once they are added back). The removal is held after its
// delete (the test locks the outbox it writes next), the mute runs then,
// and the removal commits.
func TestMutingAGroupWhileBeingRemovedLeavesNoSettingsForARejoin(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	conv := r.group(1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, removed := r.removalHeldAtTheOutbox(t, ctx, conv)
	muted := testkit.Start(t, "the mute", func() (chat.ConversationSettings, error) {
		return r.devices.SetSettings(ctx, conv, 2, chat.ConversationSettings{Muted: true})
	}, func() bool { return pgtest.LockWaiters(t, r.pool) == 2 })
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := removed.Wait(); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := muted.Wait(); !errors.Is(err, chat.ErrNotMember) {
		t.Errorf("muting while being removed: %v, want not_member", err)
	}
	if n := r.count(`SELECT count(*) FROM member_settings WHERE conversation_id = $1 AND user_id = 2`, conv); n != 0 {
		t.Errorf("%d settings rows of a user who is no longer a member", n)
	}
	if _, _, err := r.store.AddMember(ctx, conv, 1, 2, chat.RoleMember); err != nil {
		t.Fatal(err)
	}
	m, err := r.devices.Settings(ctx, 2, []int64{conv})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := m[conv]; ok && s.Muted {
		t.Errorf("added back, the group is muted for them: %+v", s)
	}
}

func TestVAPIDKeyIsGeneratedOnceAndKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := push.LoadOrCreateVAPID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := push.LoadOrCreateVAPID(dir)
	if err != nil || a != b {
		t.Fatalf("second load: %+v %v, want %+v", b, err, a)
	}
	c, err := push.ParseVAPID(a.Private)
	if err != nil || c != a {
		t.Errorf("ParseVAPID = %+v %v", c, err)
	}
	if len(a.Public) != 87 {
		t.Errorf("public key %q is not a base64url uncompressed point", a.Public)
	}
}

// TestAMemberRemovedWhileTheirPushIsDecidedGetsNoJob: a decision and the
// removal of a member it would push run at the same moment, in either
// order of taking their locks; no push job of the removed member is left
// behind (it would wait for the claim to find them gone). The decision
// holding the conversation first: the removal waits for it and deletes
// the job it wrote. The removal first (held after its delete, the test
// locking the outbox it writes next): the decision waits for it and sees
// the member gone.
func TestAMemberRemovedWhileTheirPushIsDecidedGetsNoJob(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := r.cfg
	cfg.Delay = time.Millisecond
	p, err := push.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.subscribe(2, "bob")
	jobs := `SELECT count(*) FROM push_job WHERE conversation_id = $1 AND user_id = 2`
	due := func(conv int64) {
		r.send(conv, 1, "hi bob")
		testkit.WaitFor(t, 10*time.Second, "the message to be due", func() bool {
			return r.count(`SELECT count(*) FROM message WHERE conversation_id = $1 AND created_at < now() - interval '10 ms'`, conv) == 1
		})
	}

	t.Run("decision first", func(t *testing.T) {
		conv := r.group(1, 2)
		due(conv)
		tx, err := r.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if n, err := push.DecideInTx(ctx, p, tx, []int64{conv}); err != nil || n != 1 {
			t.Fatalf("decision: %d jobs, %v; want 1", n, err)
		}
		removed := testkit.Start(t, "the removal", func() (struct{}, error) {
			return struct{}{}, r.store.RemoveMember(ctx, conv, 1, 2)
		}, func() bool { return pgtest.LockWaiters(t, r.pool) == 1 })
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := removed.Wait(); err != nil {
			t.Fatalf("remove: %v", err)
		}
		if n := r.count(jobs, conv); n != 0 {
			t.Errorf("%d push jobs of the removed member left\n%s", n, dumpJobs(r))
		}
	})

	t.Run("removal first", func(t *testing.T) {
		conv := r.group(1, 2)
		due(conv)
		hold, removed := r.removalHeldAtTheOutbox(t, ctx, conv)
		decided := testkit.Start(t, "the decision", func() (int, error) {
			return r.decide(ctx, p, conv)
		}, func() bool { return pgtest.LockWaiters(t, r.pool) == 2 })
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := removed.Wait(); err != nil {
			t.Fatalf("remove: %v", err)
		}
		n, err := decided.Wait()
		if err != nil {
			t.Fatalf("decision: %v", err)
		}
		if c := r.count(jobs, conv); c != 0 {
			t.Errorf("%d push jobs of the removed member left (the decision wrote %d)\n%s", c, n, dumpJobs(r))
		}
	})
}

// A device store failure that is no outage, a constraint the row breaks or
// a bug in a query, is answered as the store answers it (internal: 500),
// not unavailable: a 503 tells the client to retry later, and it would
// retry a request that fails every time for ever. An outage still is.
func TestADeviceStoreFailureThatIsNoOutageIsNotAnsweredRetryLater(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `ALTER TABLE push_device ADD CONSTRAINT test_no_xx CHECK (locale <> 'xx')`); err != nil {
		t.Fatal(err)
	}
	req := webDevice("https://push.example/c")
	req.Locale = "xx"
	if _, _, err := r.devices.RegisterDevice(ctx, 1, req, nil); err == nil || chat.ErrorCode(err) != chat.CodeInternal {
		t.Errorf("a constraint violation: %v (code %s), want internal", err, chat.ErrorCode(err))
	}
	if _, err := r.pool.Exec(ctx, `ALTER TABLE member_settings RENAME COLUMN mentions TO test_mentions`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.devices.Settings(ctx, 1, []int64{1}); err == nil || chat.ErrorCode(err) != chat.CodeInternal {
		t.Errorf("a query naming a missing column: %v (code %s), want internal", err, chat.ErrorCode(err))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.devices.Devices(cctx, 1); chat.ErrorCode(err) != chat.CodeUnavailable {
		t.Errorf("a cancelled request: %v, want unavailable", err)
	}
}
