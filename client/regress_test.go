package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
)

// Regression tests for the client issues the fault suite found
// (docs/faults.md "Client package issues found on the way").

// TestPersistentSessionSendReturnsSeq: with a SessionDir the session is
// persistent (session expiry > 0), and autopaho used to send Request
// Problem Information = 0 then, so chatd's PUBACK carried no seq and Send
// failed although the message was committed.
func TestPersistentSessionSendReturnsSeq(t *testing.T) {
	t.Parallel()
	_, broker, _, conv := sender(t)
	cfg := testConfig(t, broker, 2)
	cfg.SessionDir = t.TempDir()
	b := connect(t, cfg)
	for i := int64(1); i <= 3; i++ {
		seq, err := b.Send(ctxFor(t, 10*time.Second), conv, fmt.Sprintf("persistent %d", i))
		if err != nil || seq != i {
			t.Fatalf("send %d on a persistent session: seq %d, %v", i, seq, err)
		}
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("pending after acknowledged sends: %+v", p)
	}
	if st := b.Stats(); st.Resends != 0 {
		t.Errorf("Resends = %d, want 0: the first PUBACK carries the seq", st.Resends)
	}
}

// TestSendResolvesSeqWhenPUBACKLacksIt: a success PUBACK without the seq
// property still means committed. Send re-publishes the clientMsgId (chatd
// answers the duplicate with the original seq) or, if that carries no seq
// either, finds it in history; the message stays in the journal until then
// and is stored once.
func TestSendResolvesSeqWhenPUBACKLacksIt(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	_, broker := nodeOn(t, url)
	a := connect(t, testConfig(t, broker, 1))
	conv := direct(t, a, 2)
	dir := t.TempDir()
	cfg := testConfig(t, broker, 2)
	cfg.SessionDir = dir
	b := connect(t, cfg)
	sendN(t, a, conv, 2, "before") // seqs 1 and 2

	b.StripAckSeq(1) // the first PUBACK only: the resend's carries the seq
	seq, err := b.Send(ctxFor(t, 10*time.Second), conv, "seq from the duplicate")
	if err != nil || seq != 3 {
		t.Fatalf("send with a bare PUBACK: seq %d, %v; want 3", seq, err)
	}
	if r := b.Stats().Resends; r != 1 {
		t.Errorf("Resends = %d, want 1", r)
	}

	b.StripAckSeq(-1) // every PUBACK: the seq comes from history
	seq, err = b.Send(ctxFor(t, 20*time.Second), conv, "seq from history")
	if err != nil || seq != 4 {
		t.Fatalf("send with bare PUBACKs only: seq %d, %v; want 4", seq, err)
	}
	b.StripAckSeq(0)
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("pending after resolved sends: %+v", p)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "pending.jsonl")); len(data) != 0 {
		t.Errorf("journal not emptied: %s", data)
	}
	var n, distinct int
	if err := mustConn(t, url).QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT client_msg_id) FROM message WHERE conversation_id = $1`, conv).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != 4 || distinct != 4 {
		t.Errorf("conversation holds %d messages (%d distinct ids), want 4: a resend stored twice?", n, distinct)
	}
}

// TestRPCRightAfterNewIsRaceFree: the connection comes up (and the
// dispatcher issues its catch-up inbox RPC) before New has recorded the
// connection manager; an RPC issued right after New, without
// AwaitConnection, must work too. Run with -race.
func TestRPCRightAfterNewIsRaceFree(t *testing.T) {
	_, broker, a, conv := sender(t)
	sendN(t, a, conv, 1, "m")

	// Hold New between starting the connection and recording its manager
	// until the connection is up.
	client.SetNewConnectionHook(func() { time.Sleep(300 * time.Millisecond) })
	defer client.SetNewConnectionHook(nil)
	cfg := testConfig(t, broker, 2)
	cfg.Positions = map[int64]int64{conv: 0} // the dispatcher catches up at once
	b, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(t, b)
	client.SetNewConnectionHook(nil)
	page, err := b.Inbox(ctxFor(t, 10*time.Second), client.InboxOptions{})
	if err != nil || len(page.Conversations) != 1 {
		t.Fatalf("inbox right after New: %+v, %v", page, err)
	}
	got := messages(t, b, conv, 1, 10*time.Second)
	if got[0].Seq != 1 || !got[0].FromHistory {
		t.Fatalf("caught up %+v", got[0])
	}
}

// TestTransientHistoryFailureKeepsTheGap: history calls that fail (a busy
// server, an empty page) while a gap is open are retried; the later live
// event is handed on only after the gap is filled.
func TestTransientHistoryFailureKeepsTheGap(t *testing.T) {
	t.Parallel()
	a, b, conv := pair(t)
	sendN(t, a, conv, 1, "m")
	messages(t, b, conv, 1, 10*time.Second)

	dropMessages(b, 2, 4)
	calls := 0
	b.InjectHistoryFaults(func(_, _ int64) ([]client.Message, error, bool) {
		calls++
		switch calls {
		case 1: // MQTT v5 "server busy" on the request
			return nil, &client.Error{Op: "rpc history", Code: "reason_0x89", Reason: 0x89}, true
		case 2: // a page without the messages yet
			return []client.Message{}, nil, true
		case 3:
			return nil, &client.Error{Op: "rpc history", Code: "unavailable", Status: 503}, true
		}
		return nil, nil, false
	})
	sendN(t, a, conv, 4, "m") // seqs 2..5; 2..4 are lost
	got := messages(t, b, conv, 1, 20*time.Second)
	if got[0].Seq != 2 {
		t.Fatalf("first message after the gap: seq %d, want 2 (the gap was skipped)", got[0].Seq)
	}
	got = append(got, messages(t, b, conv, 3, 20*time.Second)...)
	for i, ev := range got {
		if ev.Seq != int64(i+2) || ev.FromHistory != (ev.Seq <= 4) {
			t.Fatalf("message %d: seq %d fromHistory %v", i, ev.Seq, ev.FromHistory)
		}
	}
	if calls < 4 {
		t.Errorf("%d history calls, want the 3 failures and a success", calls)
	}
}

// TestFillFromPositionZeroStartsAtSeqOne: a gap found at position 0 is
// filled from seq 1 (afterSeq=0 sent explicitly), not with the newest page,
// which would already hold the live event's seq and skip seq 1.
func TestFillFromPositionZeroStartsAtSeqOne(t *testing.T) {
	t.Parallel()
	_, broker, a, conv := sender(t)
	cfg := testConfig(t, broker, 2)
	cfg.Positions = map[int64]int64{conv: 0}
	b := connect(t, cfg)
	// Sent before the catch-up's inbox read, seq 3 would be filled from
	// history with 1 and 2: there would be no live event after the gap.
	caughtUp(t, b)
	dropMessages(b, 1, 2)
	sendN(t, a, conv, 3, "m")
	got := messages(t, b, conv, 1, 10*time.Second)
	if got[0].Seq != 1 {
		t.Fatalf("first message: seq %d, want 1 (filled with the newest page?)", got[0].Seq)
	}
	got = append(got, messages(t, b, conv, 2, 10*time.Second)...)
	for i, ev := range got {
		if ev.Seq != int64(i+1) || ev.FromHistory != (ev.Seq <= 2) || ev.Body != fmt.Sprintf("m %d", i+1) {
			t.Fatalf("message %d = %+v", i, ev)
		}
	}
	// The public API: Forward pages from the start, without it the newest.
	ctx := ctxFor(t, 10*time.Second)
	first, err := b.History(ctx, conv, client.HistoryOptions{Forward: true, Limit: 2})
	if err != nil || len(first) != 2 || first[0].Seq != 1 {
		t.Fatalf("forward from 0: %+v %v", first, err)
	}
	newest, err := b.History(ctx, conv, client.HistoryOptions{Limit: 2})
	if err != nil || len(newest) != 2 || newest[0].Seq != 2 {
		t.Fatalf("newest page: %+v %v", newest, err)
	}
}

// collect reads message.new events until want[conv] of each conversation
// arrived, checking that each conversation's seqs are consecutive from
// from[conv]+1.
func collect(t *testing.T, c *client.Client, from, want map[int64]int64, timeout time.Duration) (fromHistory int) {
	t.Helper()
	have := map[int64]int64{}
	for conv, seq := range from {
		have[conv] = seq
	}
	done := func() bool {
		for conv, n := range want {
			if have[conv] < n {
				return false
			}
		}
		return true
	}
	if !done() && !watchEvents(t, c, timeout, func(ev client.Event) bool {
		if ev.Type != client.EventMessageNew {
			return false
		}
		if ev.Seq != have[ev.ConversationID]+1 {
			t.Fatalf("conversation %d: seq %d after %d", ev.ConversationID, ev.Seq, have[ev.ConversationID])
		}
		have[ev.ConversationID] = ev.Seq
		if ev.FromHistory {
			fromHistory++
		}
		return done()
	}) {
		t.Fatalf("after %v: have %v, want %v", timeout, have, want)
	}
	return fromHistory
}

// TestPersistentCatchUpTakesTheReplayNotHistory: a persistent session that
// missed messages gets them from chatd's replay; the client must not fetch
// them through history as well (every message would come twice).
func TestPersistentCatchUpTakesTheReplayNotHistory(t *testing.T) {
	broker := newBroker(t)
	a := connect(t, testConfig(t, broker, 1))
	ctx := ctxFor(t, 30*time.Second)
	from, want := map[int64]int64{}, map[int64]int64{}
	for i := range 3 {
		g, err := a.CreateGroup(ctx, fmt.Sprint("g", i), []int64{2})
		if err != nil {
			t.Fatal(err)
		}
		from[g.ID], want[g.ID] = 0, 40
	}
	cfg := testConfig(t, broker, 2)
	cfg.SessionDir = t.TempDir()
	cfg.Positions = from
	b := connect(t, cfg) // creates the server session
	closeClient(t, b)
	for conv := range want {
		sendN(t, a, conv, 40, "missed")
	}

	b = connect(t, cfg)
	start := time.Now()
	if n := collect(t, b, from, want, 20*time.Second); n != 0 {
		t.Errorf("%d messages fetched through history, want 0 (chatd replays them)", n)
	}
	took := time.Since(start)
	noMoreMessages(t, b, 0, 2*time.Second) // let a late catch-up show up in the stats
	st := b.Stats()
	if st.Filled != 0 || st.Duplicates != 0 {
		t.Errorf("stats %+v: want nothing filled and no duplicates", st)
	}
	t.Logf("caught up 120 messages in %v: %+v", took.Round(time.Millisecond), st)
}

// TestPersistentCatchUpFillsWhatIsNotReplayed: a new persistent session
// starts "now", so chatd replays nothing from before it; what the
// application's Positions lack still arrives, through history, once the
// client has seen that no replay is coming.
func TestPersistentCatchUpFillsWhatIsNotReplayed(t *testing.T) {
	t.Parallel()
	_, broker, a, conv := sender(t)
	sendN(t, a, conv, 5, "before the session")
	cfg := testConfig(t, broker, 2)
	cfg.SessionDir = t.TempDir()
	cfg.Positions = map[int64]int64{conv: 0}
	b := connect(t, cfg)
	if n := collect(t, b, map[int64]int64{conv: 0}, map[int64]int64{conv: 5}, 15*time.Second); n != 5 {
		t.Errorf("%d of 5 through history", n)
	}
	// And live traffic flows on.
	sendN(t, a, conv, 1, "live")
	if got := messages(t, b, conv, 1, 10*time.Second); got[0].Seq != 6 || got[0].FromHistory {
		t.Fatalf("live message %+v", got[0])
	}
}
