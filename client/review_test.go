package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestARejoinedMembersCatchUpSkipsWhatItsFloorHides: user 2 is removed
// from a group whose history is "joined" and added again while their
// client is offline. The entries between the old position and the new
// join are not theirs to read (history starts after the new floor), so
// catch-up must go on from the floor instead of waiting forever for seqs
// history will never return, and live events of every conversation keep
// flowing.
func TestARejoinedMembersCatchUpSkipsWhatItsFloorHides(t *testing.T) {
	t.Parallel()
	_, broker, a, dm := sender(t)
	ctx := ctxFor(t, 60*time.Second)
	g, err := a.CreateGroup(ctx, "joined history", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 2, "before") // seqs 1, 2
	b := connect(t, testConfig(t, broker, 2))
	cfg := testConfig(t, broker, 2)
	cfg.Positions = map[int64]int64{g.ID: 2}
	closeClient(t, b)

	if err := a.RemoveMember(ctx, g.ID, 2); err != nil { // seq 3
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 3, "while away")                   // seqs 4..6, hidden from user 2 forever
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil { // join_seq 6, the entry is seq 7
		t.Fatal(err)
	}
	sendN(t, a, g.ID, 1, "welcome back") // seq 8

	b = connect(t, cfg)
	var got []client.Event
	if !watchEvents(t, b, 15*time.Second, func(ev client.Event) bool {
		if ev.ConversationID != g.ID || (ev.Type != client.EventMessageNew && ev.Type != client.EventSystemNew) {
			return false
		}
		got = append(got, ev)
		return ev.Type == client.EventMessageNew
	}) {
		t.Fatalf("no message of the group after the rejoin within 15s (entries %+v, positions %v): catch-up stuck below the floor",
			got, b.Positions())
	}
	if last := got[len(got)-1]; last.Seq != 8 || last.Body != "welcome back 1" {
		t.Fatalf("first message after the rejoin: %+v", last)
	}
	for _, ev := range got {
		if ev.Seq <= 6 {
			t.Fatalf("entry %d from before the rejoin handed on: %+v", ev.Seq, ev)
		}
	}
	// Everything else flows on.
	sendN(t, a, dm, 1, "direct")
	if m := messages(t, b, dm, 1, 10*time.Second); m[0].Body != "direct 1" {
		t.Fatalf("direct message %+v", m[0])
	}
	sendN(t, a, g.ID, 1, "live")
	if m := messages(t, b, g.ID, 1, 10*time.Second); m[0].Seq != 9 {
		t.Fatalf("live group message %+v", m[0])
	}
}

// TestAPublishLargerThanTheServersMaximumPacketSizeIsRefusedAndTheConnectionStays:
// chatd's CONNACK says the largest packet it accepts (MQTT 5 Maximum
// Packet Size) and a client must not send a larger one (MQTT-3.1.2-24);
// chatd drops the connection of one that does. A Send or a request that
// big is refused for good at once (ErrInvalid, code too_large) instead of
// being re-published on every reconnection forever, tearing down the
// connection each time (events, requests and the other sends with it).
func TestAPublishLargerThanTheServersMaximumPacketSizeIsRefusedAndTheConnectionStays(t *testing.T) {
	t.Parallel()
	a, b, conv := pair(t)
	huge := strings.Repeat("x", 200*1024) // the packet limit is 164 KiB (the default 16 KiB body, JSON-escaped)
	_, err := a.Send(ctxFor(t, 5*time.Second), conv, huge)
	var e *client.Error
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || e.Code != "too_large" {
		t.Fatalf("send of a body larger than a packet may be: %v, want too_large (ErrInvalid)", err)
	}
	if p := a.Pending(); len(p) != 0 {
		t.Fatalf("the refused send is still pending: %d", len(p))
	}
	_, err = a.Search(ctxFor(t, 5*time.Second), huge, client.SearchOptions{})
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || e.Code != "too_large" {
		t.Fatalf("request larger than a packet may be: %v, want too_large (ErrInvalid)", err)
	}
	if n := a.Stats().Connects; n != 1 {
		t.Fatalf("%d connections: the oversized publishes cost the connection", n)
	}
	seq, err := a.Send(ctxFor(t, 5*time.Second), conv, "small")
	if err != nil || seq != 1 {
		t.Fatalf("the next send: %d, %v", seq, err)
	}
	if m := messages(t, b, conv, 1, 10*time.Second); m[0].Body != "small" {
		t.Fatalf("peer got %+v", m[0])
	}
}

// TestARequestOfAPreviousRunDoesNotAnswerThisRunsRequest: the replies to
// requests are addressed to the client id, which a SessionDir keeps
// across runs. A reply to a request the previous run made (it closed, or
// died, before the reply came) reaches the next run on the same session;
// it must not be taken for the reply of that run's own request (its
// correlation data must not repeat), or History hands one conversation's
// messages out as another's.
func TestARequestOfAPreviousRunDoesNotAnswerThisRunsRequest(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	_, broker := nodeOn(t, url)
	a := connect(t, testConfig(t, broker, 1))
	ctx := ctxFor(t, 60*time.Second)
	one := direct(t, a, 2)
	g, err := a.CreateGroup(ctx, "two", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	sendN(t, a, one, 1, "one")
	sendN(t, a, g.ID, 1, "two")
	cfg := testConfig(t, broker, 2)
	cfg.SessionDir = t.TempDir()

	// History waits for the message table while the test holds it.
	pg := mustConn(t, url)
	waiting := func(n int) func() bool {
		return func() bool {
			var got int
			if err := pg.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			return got >= n
		}
	}
	release := pgtest.LockTable(t, url, "message IN ACCESS EXCLUSIVE MODE")
	first := connect(t, cfg)
	go func() { _, _ = first.History(ctx, one, client.HistoryOptions{}) }()
	testkit.WaitFor(t, 10*time.Second, "the first run's history request to wait", waiting(1))
	closeClient(t, first)

	second := connect(t, cfg)
	type result struct {
		msgs []client.Message
		err  error
	}
	res := make(chan result, 1)
	go func() {
		msgs, err := second.History(ctx, g.ID, client.HistoryOptions{})
		res <- result{msgs, err}
	}()
	testkit.WaitFor(t, 10*time.Second, "the second run's history request to wait", waiting(2))
	release()
	r := <-res
	if r.err != nil {
		t.Fatalf("history of the group: %v", r.err)
	}
	if len(r.msgs) != 1 || r.msgs[0].ConversationID != g.ID || r.msgs[0].Body != "two 1" {
		t.Fatalf("history of conversation %d answered with %+v (the previous run's request for conversation %d?)", g.ID, r.msgs, one)
	}
}
