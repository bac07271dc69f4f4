package push_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/kafkatest"
	"github.com/chatd/chatd/internal/push"
)

// change commits an edit, recall or reaction of conv's message target.
func (r *rig) change(c chat.Change) int64 {
	r.t.Helper()
	c.ClientMsgID = uuid.NewString()
	res, err := r.store.Change(context.Background(), c)
	if err != nil {
		r.t.Fatalf("%s of %d: %v", c.Kind, c.TargetSeq, err)
	}
	return res.Entry.Seq
}

func (r *rig) edit(conv, user, target int64, body string) int64 {
	return r.change(chat.Change{Kind: chat.KindEdit, ConversationID: conv, UserID: user, TargetSeq: target, Body: body})
}

func (r *rig) react(conv, user, target int64, emoji string) int64 {
	return r.change(chat.Change{Kind: chat.KindReaction, ConversationID: conv, UserID: user, TargetSeq: target, Emoji: emoji, On: true})
}

func (r *rig) recall(conv, user, target int64) int64 {
	return r.change(chat.Change{Kind: chat.KindRecall, ConversationID: conv, UserID: user, TargetSeq: target})
}

func TestEditsAndReactionsToAnUnacknowledgedMessagePushNothingOfTheirOwn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// Changes are not hinted (they never push): the scan finds them.
	r.start(func(c *push.Config) { c.ReconcileInterval = 100 * time.Millisecond })
	conv := r.group(1, 2, 3)
	r.subscribe(2, "bob")
	seq := r.send(conv, 1, "hello")
	r.waitPushes("bob", 1, 3*time.Second)
	// Bob has still acknowledged nothing: each change is an entry after
	// his watermark, from someone else.
	r.edit(conv, 1, seq, "hello, fixed")
	last := r.react(conv, 3, seq, "👍")
	r.waitCount(last, 3*time.Second, `SELECT COALESCE((SELECT seq FROM push_cursor WHERE conversation_id = $1), 0)`, conv)
	// Decided, and no push stands for them.
	if n := r.count(`SELECT seq FROM push_last WHERE user_id = 2 AND conversation_id = $1`, conv); n != seq {
		t.Errorf("pushes cover up to seq %d, want only the message %d", n, seq)
	}
	// Past the delay and the minimum interval: nothing more.
	r.quiet("bob", 1, r.cfg.Delay+r.cfg.MinInterval+500*time.Millisecond)
}

func TestCountAndBadgeCountMessagesOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// A delay long enough that every entry below is committed before the
	// first message is due.
	r.start(func(c *push.Config) { c.Delay = time.Second })
	g := r.group(1, 2, 3)
	d := r.direct(1, 2)
	r.subscribe(2, "bob")
	m1 := r.send(g, 1, "one")
	r.edit(g, 1, m1, "one, fixed")
	r.react(g, 3, m1, "👍")
	m2 := r.send(g, 1, "two")
	r.react(g, 3, m2, "🎉")
	dm := r.send(d, 1, "direct")
	r.edit(d, 1, dm, "direct, fixed")
	got := r.waitPushes("bob", 2, 5*time.Second)
	for _, n := range got {
		switch n.ConversationID {
		case g:
			if n.Count != 2 || n.Seq != m2 || n.Title != "team" {
				t.Errorf("group push = %+v, want 2 messages up to seq %d", n, m2)
			}
		case d:
			if n.Count != 1 || n.Seq != dm {
				t.Errorf("direct push = %+v, want 1 message", n)
			}
		}
		// 3 unread messages in all, although 8 entries are unread.
		if n.Badge != 3 {
			t.Errorf("badge %d in %+v, want the 3 unread messages", n.Badge, n)
		}
	}
}

// TestRecalledPushedMessageGetsOneRemovePushPerDeviceThatShowedIt: in a
// group, the recipient who was pushed the message gets a silent remove on
// each of his devices; the sender, a member who had acknowledged it and
// one who muted the group were never pushed it and get nothing.
func TestRecalledPushedMessageGetsOneRemovePushPerDeviceThatShowedIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(nil)
	g := r.group(1, 2, 3, 4)
	r.subscribe(1, "alice")
	r.subscribe(2, "bob-phone")
	r.subscribe(2, "bob-laptop")
	r.subscribe(3, "carol")
	r.subscribe(4, "dave")
	r.settings(g, 4, chat.ConversationSettings{Muted: true})
	seq := r.send(g, 1, "oops")
	r.ack(g, 3, seq) // carol is online
	for _, name := range []string{"bob-phone", "bob-laptop"} {
		r.waitPushes(name, 1, 3*time.Second)
	}
	r.recall(g, 1, seq)
	for _, name := range []string{"bob-phone", "bob-laptop"} {
		got := r.waitPushes(name, 2, 3*time.Second)
		if n := got[1]; n.Type != push.TypeRemove || n.ConversationID != g || n.Seq != seq || n.Title != "" || n.Body != "" || n.Count != 0 {
			t.Errorf("%s: second push = %+v, want a silent remove of seq %d", name, n, seq)
		}
		p := r.ep.Of(name)[1]
		if p.Header.Get("Topic") != r.ep.Of(name)[0].Header.Get("Topic") {
			t.Errorf("%s: remove's Topic %q, want the notification's (it replaces it if still undelivered)", name, p.Header.Get("Topic"))
		}
	}
	r.quiet("bob-phone", 2, 800*time.Millisecond)
	r.quiet("bob-laptop", 2, 0)
	for _, name := range []string{"alice", "carol", "dave"} {
		r.quiet(name, 0, 0)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE kind = 'remove'`); n != 0 {
		t.Errorf("%d remove jobs left", n)
	}
}

func TestMessageRecalledBeforeItsPushWasDueIsNeverPushed(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Delay = time.Second })
	seq := r.send(conv, 1, "wrong chat")
	rc := r.recall(conv, 1, seq)
	r.waitCount(rc, 5*time.Second, `SELECT COALESCE((SELECT seq FROM push_cursor WHERE conversation_id = $1), 0)`, conv)
	r.quiet("bob", 0, 500*time.Millisecond)
	if n := r.count(`SELECT count(*) FROM push_job`); n != 0 {
		t.Errorf("%d jobs for a recalled message:\n%s", n, dumpJobs(r))
	}
	if n := r.count(`SELECT count(*) FROM push_last`); n != 0 {
		t.Errorf("the recalled message was decided into a push (%d push_last rows)", n)
	}
}

// TestPreviewNeverShowsARecalledBody: pushes waiting out the minimum
// interval when one of their messages is recalled: one left with another
// message counts and previews that one only; one that stood for nothing
// but the recalled message is not sent.
func TestPreviewNeverShowsARecalledBody(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Preview, c.MinInterval = true, 3*time.Second })
	r.send(conv, 1, "first")
	r.waitPushes("bob", 1, 3*time.Second)
	keep := r.send(conv, 1, "keep")
	secret := r.send(conv, 1, "secret one")
	// Decided (one waiting push of both), not yet due.
	r.waitCount(2, 3*time.Second, `SELECT COALESCE(sum(count), 0) FROM push_job WHERE kind = 'message' AND state = 'pending'`)
	r.recall(conv, 1, secret)
	got := r.waitPushes("bob", 2, 5*time.Second)
	if n := got[1]; n.Type != push.TypeMessage || n.Body != "keep" || n.Seq != keep || n.Count != 1 || n.Title != "New message" {
		t.Errorf("push after the recall = %+v, want one message, seq %d, previewing %q", n, keep, "keep")
	}

	alone := r.send(conv, 1, "secret two")
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE kind = 'message' AND state = 'pending'`)
	r.recall(conv, 1, alone)
	r.waitCount(0, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'pending'`)
	r.quiet("bob", 2, 3500*time.Millisecond) // past the minimum interval
	for _, p := range r.ep.Pushes() {
		if strings.Contains(string(p.Plaintext), "secret") {
			t.Errorf("a push showed a recalled text: %s", p.Plaintext)
		}
	}
}

// TestPushInFlightWhenItsMessageIsRecalledIsFollowedByARemove: the push
// service holds a push that previews the message when it is recalled; the
// remove waits until that request is over, and the retry of the push
// (all it stood for is recalled) is not sent.
func TestPushInFlightWhenItsMessageIsRecalledIsFollowedByARemove(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Preview, c.Timeout = true, time.Second })
	r.ep.Hang("bob", true)
	seq := r.send(conv, 1, "secret")
	r.waitRequests(1, 3*time.Second, "the push to reach the endpoint")
	held := r.ep.Pushes()[0]
	if !strings.Contains(string(held.Plaintext), "secret") {
		t.Fatalf("held push %s, want the preview", held.Plaintext)
	}
	r.ep.Hang("bob", false) // the held request stays held until chatd's timeout
	r.recall(conv, 1, seq)
	got := r.waitPushes("bob", 1, 5*time.Second)
	if got[0].Type != push.TypeRemove || got[0].Seq != seq {
		t.Fatalf("push after the recall = %+v, want the remove", got[0])
	}
	if gap := r.ep.Of("bob")[0].At.Sub(held.At); gap < 900*time.Millisecond {
		t.Errorf("remove sent %v after the push it removes, while that was still in flight", gap)
	}
	r.quiet("bob", 1, 1500*time.Millisecond) // past the retry's backoff
	r.waitCount(0, 3*time.Second, `SELECT count(*) FROM push_job WHERE state <> 'sent'`)
}

// TestRecallOfAMessageANewerPushReplacedSendsNoRemove: the devices show
// a conversation's newest notification (same tag and collapse key); a
// recall of a message only an older one showed leaves it alone.
func TestRecallOfAMessageANewerPushReplacedSendsNoRemove(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.MinInterval = 300 * time.Millisecond })
	old := r.send(conv, 1, "old")
	r.waitPushes("bob", 1, 3*time.Second)
	newer := r.send(conv, 1, "newer")
	if got := r.waitPushes("bob", 2, 3*time.Second); got[1].Seq != newer {
		t.Fatalf("second push = %+v", got[1])
	}
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent' AND seq = $1`, newer)
	rc := r.recall(conv, 1, old)
	r.waitCount(rc, 3*time.Second, `SELECT COALESCE((SELECT seq FROM push_cursor WHERE conversation_id = $1), 0)`, conv)
	r.quiet("bob", 2, 800*time.Millisecond)
	r.recall(conv, 1, newer)
	if got := r.waitPushes("bob", 3, 3*time.Second); got[2].Type != push.TypeRemove || got[2].Seq != newer {
		t.Errorf("after recalling the newest push's message: %+v, want its remove", got[2])
	}
}

func TestRemovePushGoesToTheFCMAndAPNsSenderMarkedAsARemoval(t *testing.T) {
	t.Parallel()
	kc, snd, outputs := startOutputs(t, 1)
	r := newRig(t)
	r.start(outputs)
	dev := registerHandedOff(t, r, 2, chat.DeviceRequest{Platform: "apns", Token: "abcdef0123", AppID: "com.example.chat"})
	conv := r.direct(1, 2)
	seq := r.send(conv, 1, "hi")
	deadline := time.Now().Add(5 * time.Second)
	for len(snd.got()) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no push reached the sender")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.recall(conv, 1, seq)
	for len(snd.got()) < 2 {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("the sender got %d requests, want the push and its remove", len(snd.got()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	reqs := snd.got()
	msg, rm := reqs[0], reqs[1]
	if rm.Notification.Type != push.TypeRemove || rm.Notification.Seq != seq || rm.Notification.ConversationID != conv ||
		rm.Device.ID != dev || rm.Device.Token != "abcdef0123" || rm.UserID != 2 ||
		rm.CollapseKey != msg.CollapseKey || rm.ID == msg.ID || rm.Notification.Title != "" {
		t.Errorf("remove request = %+v (the push was %+v)", rm, msg)
	}
	recs, err := kafkatest.ReadPartition(context.Background(), kc.ListenAddrs()[0], "chat.push", 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, rec := range recs {
		for _, h := range rec.Headers {
			if h.Key == "notification" {
				kinds = append(kinds, string(h.Value))
			}
		}
	}
	if strings.Join(kinds, ",") != "message,remove" {
		t.Errorf("chat.push records' notification headers %v, want message then remove", kinds)
	}
}

// TestRecallBehindAYoungMessageIsHandledAtOnce: a recall committed after
// a message that is not yet due (the cursor cannot pass it) still sends
// its remove at once, before that message's push.
func TestRecallBehindAYoungMessageIsHandledAtOnce(t *testing.T) {
	t.Parallel()
	r, conv := toBob(t, func(c *push.Config) { c.Delay, c.MinInterval = 2*time.Second, 100*time.Millisecond })
	old := r.send(conv, 1, "oops")
	r.waitPushes("bob", 1, 5*time.Second)
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
	young := r.send(conv, 1, "meant this")
	recalled := time.Now()
	r.recall(conv, 1, old)
	got := r.waitPushes("bob", 2, 5*time.Second)
	if got[1].Type != push.TypeRemove || got[1].Seq != old {
		t.Fatalf("second push = %+v, want the remove of %d", got[1], old)
	}
	if d := r.ep.Of("bob")[1].At.Sub(recalled); d > 1200*time.Millisecond {
		t.Errorf("remove sent %v after the recall, want it before the young message is due (2 s)", d)
	}
	if got := r.waitPushes("bob", 3, 5*time.Second); got[2].Type != push.TypeMessage || got[2].Seq != young || got[2].Count != 1 {
		t.Errorf("third push = %+v, want the young message", got[2])
	}
}

// TestConcurrentDecisionsOfARecallRemoveOnce: a second decider deciding a
// recall at the same time as the first waits for it and finds the message
// already out of every push: one remove, standing for one recall.
func TestConcurrentDecisionsOfARecallRemoveOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stop := r.start(nil)
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	seq := r.send(conv, 1, "oops")
	r.waitPushes("bob", 1, 3*time.Second)
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
	stop()
	r.recall(conv, 1, seq)
	if _, err := r.decideTwice(conv, func(_ int, err error) {
		if err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT count(*) FROM push_job WHERE kind = 'remove'`); n != 1 {
		t.Errorf("%d remove jobs, want 1:\n%s", n, dumpJobs(r))
	}
	if n := r.count(`SELECT COALESCE(sum(count), 0) FROM push_job WHERE kind = 'remove'`); n != 1 {
		t.Errorf("the remove job stands for %d recalls, want 1:\n%s", n, dumpJobs(r))
	}
}

// TestAnOlderPushsRetryNeverReplacesANewerOne: the push service refuses
// a conversation's push once (503, Retry-After); a newer message is
// pushed meanwhile. The older push's retry must not land after the newer
// one (the device shows the conversation's last notification: it would
// go back to the older message), and when that older message is recalled
// no device is left showing it.
func TestAnOlderPushsRetryNeverReplacesANewerOne(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) {
		c.Preview = true
		c.MinInterval = time.Millisecond
		c.BackoffMin, c.BackoffMax = 2*time.Second, 2*time.Second
	})
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	r.ep.Script("bob", http.StatusServiceUnavailable)
	first := r.send(conv, 1, "first, soon recalled")
	r.waitRequests(1, 3*time.Second, "the first push to reach the endpoint")
	second := r.send(conv, 1, "second")
	r.waitPushes("bob", 1, 3*time.Second)
	// Past the first push's retry (2 s after its refusal).
	r.quiet("bob", 2, 2500*time.Millisecond)
	got := notifications(t, r.ep.Of("bob"))
	last := got[len(got)-1]
	if last.Seq != second {
		t.Errorf("the device's last notification is %+v, want the newest message %d (pushes: %s)", last, second, describe(r.ep.Pushes()))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq < got[i-1].Seq {
			t.Errorf("push %d (seq %d) arrived after push %d (seq %d)", i, got[i].Seq, i-1, got[i-1].Seq)
		}
	}

	// The notification counted the first message: it is taken away.
	r.recall(conv, 1, first)
	got = r.waitPushes("bob", len(got)+1, 3*time.Second)
	if n := got[len(got)-1]; n.Type != push.TypeRemove || n.Seq != first {
		t.Errorf("push after the recall = %+v, want the remove of %d\njobs:\n%s", n, first, dumpJobs(r))
	}
	r.quiet("bob", len(got), time.Second)
}

// TestARemoveRetriedLaterNeverTakesAwayANewerNotification: the remove of
// a recalled message is refused once by the push service; a newer
// message meanwhile is pushed after the remove's retry, never before it
// (the remove takes the conversation's notification away: it would take
// the newer one).
func TestARemoveRetriedLaterNeverTakesAwayANewerNotification(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) {
		c.MinInterval = time.Millisecond
		c.BackoffMin, c.BackoffMax = 2*time.Second, 2*time.Second
	})
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	first := r.send(conv, 1, "oops")
	r.waitPushes("bob", 1, 3*time.Second)
	r.ep.Script("bob", http.StatusServiceUnavailable)
	r.recall(conv, 1, first)
	r.waitRequests(2, 3*time.Second, "the remove to reach the endpoint")
	second := r.send(conv, 1, "the right one")
	got := r.waitPushes("bob", 3, 5*time.Second)
	r.quiet("bob", 3, time.Second)
	if n := got[1]; n.Type != push.TypeRemove || n.Seq != first {
		t.Errorf("second push = %+v, want the remove of %d", n, first)
	}
	if n := got[2]; n.Type != push.TypeMessage || n.Seq != second {
		t.Errorf("last push = %+v, want the newer message %d on screen (pushes: %s)", n, second, describe(r.ep.Pushes()))
	}
}

// TestRecallRemovesTheNotificationFromAMemberWhoWasRemovedSinceItsPush: a
// message pushed to bob, bob removed from the group (or leaving it), the
// message recalled: bob's devices still show it and get the silent
// remove, as every device whose notification showed it does.
func TestRecallRemovesTheNotificationFromAMemberWhoWasRemovedSinceItsPush(t *testing.T) {
	t.Parallel()
	r, g, seq := previewedToBob(t)
	if err := r.store.RemoveMember(context.Background(), g, 1, 2); err != nil {
		t.Fatal(err)
	}
	r.recall(g, 1, seq)
	got := r.waitPushes("bob", 2, 3*time.Second)
	if n := got[1]; n.Type != push.TypeRemove || n.ConversationID != g || n.Seq != seq || n.Body != "" {
		t.Errorf("second push = %+v, want a silent remove of seq %d", n, seq)
	}
	r.quiet("bob", 2, 500*time.Millisecond)
}

// TestRecallRemovesANotificationWhoseRetryFoundTheMemberGone: bob's phone
// shows the message, his laptop's push service asked for a retry; bob
// leaves the group before it; the retry is not sent (he is no member),
// but the phone still shows the message, and its recall takes it away.
func TestRecallRemovesANotificationWhoseRetryFoundTheMemberGone(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(func(c *push.Config) { c.Preview = true })
	g := r.group(1, 2, 3)
	r.subscribe(2, "bob-phone")
	r.subscribe(2, "bob-laptop")
	r.ep.Script("bob-laptop", http.StatusServiceUnavailable) // Retry-After: 1
	seq := r.send(g, 1, "the password is hunter2")
	r.waitPushes("bob-phone", 1, 3*time.Second)
	if err := r.store.RemoveMember(context.Background(), g, 2, 2); err != nil {
		t.Fatal(err)
	}
	// The retry comes and finds bob gone.
	r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state = 'sending'`)
	r.quiet("bob-laptop", 0, 0)
	r.recall(g, 1, seq)
	got := r.waitPushes("bob-phone", 2, 3*time.Second)
	if n := got[1]; n.Type != push.TypeRemove || n.Seq != seq {
		t.Errorf("second push = %+v, want the remove of seq %d", n, seq)
	}
}

// TestARemoveOfSeveralRecallsNamesEveryRecalledMessage: recalls of two of
// a notification's three messages decided together make one remove, which
// names both (seqs), so that the device takes both out of the notification
// and not only the newest.
func TestARemoveOfSeveralRecallsNamesEveryRecalledMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stop := r.start(nil)
	conv := r.direct(1, 2)
	r.subscribe(2, "bob")
	first, second := r.send(conv, 1, "one"), r.send(conv, 1, "two")
	third := r.send(conv, 1, "three")
	if got := r.waitPushes("bob", 1, 3*time.Second); got[0].Seq != third || got[0].Count != 3 {
		t.Fatalf("first push = %+v, want the 3 messages up to %d", got[0], third)
	}
	r.waitCount(1, 3*time.Second, `SELECT count(*) FROM push_job WHERE state = 'sent'`)
	stop()
	r.recall(conv, 1, first)
	r.recall(conv, 1, second)
	p := r.pusher()
	if _, err := r.decide(context.Background(), p, conv); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	got := r.waitPushes("bob", 2, 3*time.Second)
	if n := got[1]; n.Type != push.TypeRemove || n.Seq != second || !slices.Equal(n.Seqs, []int64{first, second}) {
		t.Errorf("second push = %+v, want one remove of %d and %d (seq the newest)", n, first, second)
	}
	r.quiet("bob", 2, 500*time.Millisecond)
}
