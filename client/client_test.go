package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// direct opens the direct conversation of a and b through a's client.
func direct(t *testing.T, a *client.Client, peer int64) int64 {
	t.Helper()
	conv, _, err := a.OpenDirect(ctxFor(t, 10*time.Second), peer)
	if err != nil {
		t.Fatalf("open direct: %v", err)
	}
	return conv.ID
}

func sendN(t *testing.T, c *client.Client, conv int64, n int, prefix string) []int64 {
	t.Helper()
	seqs := make([]int64, 0, n)
	for i := range n {
		seq, err := c.Send(ctxFor(t, 10*time.Second), conv, fmt.Sprintf("%s %d", prefix, i+1))
		if err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func TestSendReturnsSeqAndPeerReceivesInOrder(t *testing.T) {
	t.Parallel()
	a, b, conv := pair(t)

	seqs := sendN(t, a, conv, 5, "hello")
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("send %d returned seq %d", i+1, s)
		}
	}
	got := messages(t, b, conv, 5, 10*time.Second)
	for i, ev := range got {
		if ev.Seq != int64(i+1) || ev.SenderID != 1 || ev.Body != fmt.Sprintf("hello %d", i+1) || ev.ClientMsgID == "" {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	// The sender's own client gets them too (multi-device sync).
	messages(t, a, conv, 5, 10*time.Second)
}

// TestGapAfterOfflineIsFilledFromHistory: an ephemeral client (no server
// session, so nothing is replayed) is cut off while 30 messages are sent;
// after reconnecting it fetches them through history and delivers each once,
// in order.
func TestGapAfterOfflineIsFilledFromHistory(t *testing.T) {
	t.Parallel()
	srv, _, a, conv := sender(t)

	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	cfg.Ephemeral = true
	cfg.Positions = map[int64]int64{conv: 0}
	b := connect(t, cfg)

	px.Cut()
	testkit.WaitFor(t, 5*time.Second, "b to notice the cut", func() bool { return !b.Connected() })
	sendN(t, a, conv, 30, "while away")
	px.Resume()

	got := messages(t, b, conv, 30, 20*time.Second)
	for i, ev := range got {
		if ev.Seq != int64(i+1) || !ev.FromHistory || ev.Body != fmt.Sprintf("while away %d", i+1) {
			t.Fatalf("message %d = %+v, want seq %d from history", i, ev, i+1)
		}
	}
	noMoreMessages(t, b, conv, 500*time.Millisecond)
	if st := b.Stats(); st.Filled != 30 {
		t.Errorf("Filled = %d, want 30", st.Filled)
	}
	if pos := b.Positions()[conv]; pos != 30 {
		t.Errorf("position = %d, want 30", pos)
	}
}

// TestLiveGapIsFilledBeforeLaterMessages: events lost on the way (dropped by
// a test hook) are noticed at the next message and fetched first.
func TestLiveGapIsFilledBeforeLaterMessages(t *testing.T) {
	t.Parallel()
	a, b, conv := pair(t)

	sendN(t, a, conv, 1, "m")
	messages(t, b, conv, 1, 10*time.Second)
	dropMessages(b, 2, 4)
	sendN(t, a, conv, 4, "m") // seqs 2..5; 2..4 are lost
	got := messages(t, b, conv, 4, 10*time.Second)
	for i, ev := range got {
		wantHistory := ev.Seq <= 4
		if ev.Seq != int64(i+2) || ev.FromHistory != wantHistory {
			t.Fatalf("message %d: seq %d fromHistory %v", i, ev.Seq, ev.FromHistory)
		}
	}
	if st := b.Stats(); st.Filled != 3 || st.GapFills != 1 {
		t.Errorf("stats = %+v, want 3 filled in 1 fill", st)
	}
}

func TestDuplicateEventIsDropped(t *testing.T) {
	t.Parallel()
	a, b, conv := pair(t)

	sendN(t, a, conv, 2, "m")
	first := messages(t, b, conv, 2, 10*time.Second)
	for _, ev := range first {
		dup, _ := json.Marshal(ev)
		b.InjectEvent(dup) // as a redelivery after a crash would
	}
	sendN(t, a, conv, 1, "m")
	next := messages(t, b, conv, 1, 10*time.Second)
	if next[0].Seq != 3 {
		t.Fatalf("after duplicates of 1 and 2, got seq %d, want 3", next[0].Seq)
	}
	if d := b.Stats().Duplicates; d != 2 {
		t.Errorf("Duplicates = %d, want 2", d)
	}
	// Non-message events pass through.
	b.InjectEvent([]byte(`{"type":"typing","conversationId":1,"userId":1}`))
	if ev := nextEvent(t, b, client.EventTyping, 5*time.Second); ev.UserID != 1 {
		t.Errorf("typing event = %+v", ev)
	}
}

// TestOrderSurvivesConnectionKills kills the receiver's TCP connection
// several times while messages stream in: it still delivers 1..N exactly
// once and in order.
func TestOrderSurvivesConnectionKills(t *testing.T) {
	t.Parallel()
	srv, _, a, conv := sender(t)
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 2)
	cfg.SessionDir = t.TempDir()
	b := connect(t, cfg)

	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if _, err := a.Send(context.Background(), conv, fmt.Sprintf("m%d", i+1)); err != nil {
				t.Errorf("send %d: %v", i+1, err)
				return
			}
		}
	}()
	got := make([]client.Event, 0, n)
	for kill := 1; kill <= 3; kill++ {
		got = append(got, messages(t, b, conv, 40, 20*time.Second)...)
		// messages checks order within a call; check it across calls too.
		px.Kill()
	}
	rest := messages(t, b, conv, n-len(got), 30*time.Second)
	if rest[0].Seq != got[len(got)-1].Seq+1 {
		t.Fatalf("seq %d after %d across a reconnect", rest[0].Seq, got[len(got)-1].Seq)
	}
	wg.Wait()
	noMoreMessages(t, b, conv, 500*time.Millisecond)
	if st := b.Stats(); st.Connects < 4 {
		t.Errorf("Connects = %d, want at least 4 (3 kills)", st.Connects)
	}
}

// TestMarkReadIsDebouncedToOnePublish: MarkReads within the debounce
// interval are published once, at the highest seq. The calls are made
// back to back, well within the interval: with pauses between them a
// loaded machine stretched the loop past it, and the timer then
// (rightly) published in the middle of it.
func TestMarkReadIsDebouncedToOnePublish(t *testing.T) {
	url := pgtest.NewDB(t)
	_, broker := nodeOn(t, url)
	a := connect(t, testConfig(t, broker, 1))
	cfg := testConfig(t, broker, 2)
	cfg.ReadDebounce = time.Second
	b := connect(t, cfg)
	conv := direct(t, a, 2)
	sendN(t, a, conv, 10, "m")
	messages(t, b, conv, 10, 10*time.Second)

	start := time.Now()
	for seq := int64(1); seq <= 10; seq++ {
		if err := b.MarkRead(context.Background(), conv, seq); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d >= cfg.ReadDebounce {
		t.Fatalf("10 MarkRead calls took %v, not within the debounce interval of %v: the test did not test", d, cfg.ReadDebounce)
	}
	ev := nextEvent(t, a, client.EventReadUpdated, 10*time.Second)
	if ev.UserID != 2 || ev.Seq != 10 {
		t.Fatalf("read.updated = %+v, want user 2 at seq 10", ev)
	}
	// The publish's PUBACK is counted when it reaches b, which may be
	// after a got the read.updated.
	testkit.WaitFor(t, 10*time.Second, "the receipt's PUBACK", func() bool { return b.Stats().ReadsPublished >= 1 })
	// No further read.updated: only one receipt was published.
	watchEvents(t, a, 2*cfg.ReadDebounce, func(ev client.Event) bool {
		if ev.Type == client.EventReadUpdated {
			t.Fatalf("second read.updated %+v: receipts not debounced", ev)
		}
		return false
	})
	if n := b.Stats().ReadsPublished; n != 1 {
		t.Errorf("ReadsPublished = %d, want 1", n)
	}
	var lastRead int64
	if err := mustConn(t, url).QueryRow(context.Background(),
		`SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv).Scan(&lastRead); err != nil {
		t.Fatal(err)
	}
	if lastRead != 10 {
		t.Errorf("last_read_seq = %d, want 10", lastRead)
	}

	// Flush publishes at once.
	if err := b.MarkRead(context.Background(), conv, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if n := b.Stats().ReadsPublished; n != 2 {
		t.Errorf("after Flush ReadsPublished = %d, want 2", n)
	}
}

func TestRefusalsAreTypedErrors(t *testing.T) {
	t.Parallel()
	broker := newBroker(t)
	a := connect(t, testConfig(t, broker, 1))
	c := connect(t, testConfig(t, broker, 3))
	ctx := ctxFor(t, 20*time.Second)
	group, err := a.CreateGroup(ctx, "team", []int64{2})
	if err != nil {
		t.Fatal(err)
	}

	_, err = c.Send(ctx, group.ID, "let me in")
	if !errors.Is(err, client.ErrNotMember) {
		t.Fatalf("send as non-member: %v, want ErrNotMember", err)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Reason != 0x87 {
		t.Errorf("error %#v, want reason 0x87", err)
	}
	if _, err := a.Send(ctx, group.ID, ""); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("empty body: %v, want ErrInvalid", err)
	}
	if _, err := a.Send(ctx, group.ID, "bad \xff utf-8"); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("invalid UTF-8: %v, want ErrInvalid", err)
	}
	if _, err := a.SendWithID(ctx, group.ID, "not-a-uuid", "x"); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("bad clientMsgId: %v, want ErrInvalid", err)
	}
	if p := c.Pending(); len(p) != 0 {
		t.Errorf("refused sends still pending: %+v", p)
	}
	if p := a.Pending(); len(p) != 0 {
		t.Errorf("refused sends still pending: %+v", p)
	}
	if _, err := c.History(ctx, group.ID, client.HistoryOptions{}); !errors.Is(err, client.ErrNotMember) {
		t.Errorf("history as non-member: %v, want ErrNotMember", err)
	}
	if _, err := a.Conversation(ctx, 999999); !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrNotMember) {
		t.Errorf("unknown conversation: %v", err)
	}
	b := connect(t, testConfig(t, broker, 2))
	if _, err := b.AddMember(ctx, group.ID, 4); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("add by plain member: %v, want ErrForbidden", err)
	}
	if !errors.As(err, &ce) {
		t.Fatalf("not an *Error: %v", err)
	}
}

func TestRequestsRoundTrip(t *testing.T) {
	t.Parallel()
	broker := newBroker(t)
	a := connect(t, testConfig(t, broker, 1))
	b := connect(t, testConfig(t, broker, 2))
	ctx := ctxFor(t, 20*time.Second)

	g, err := a.CreateGroup(ctx, "team", []int64{2})
	if err != nil || g.Type != "GROUP" || len(g.Members) != 2 {
		t.Fatalf("create group: %+v %v", g, err)
	}
	d, created, err := a.OpenDirect(ctx, 2)
	if err != nil || !created || d.Type != "DIRECT" {
		t.Fatalf("open direct: %+v %v %v", d, created, err)
	}
	if d2, created, err := b.OpenDirect(ctx, 1); err != nil || created || d2.ID != d.ID {
		t.Fatalf("open direct again: %+v %v %v", d2, created, err)
	}
	if m, err := a.AddMember(ctx, g.ID, 3); err != nil || m.UserID != 3 || m.Role != "member" {
		t.Fatalf("add member: %+v %v", m, err)
	}
	seq, err := a.Send(ctx, g.ID, "hi team")
	if err != nil {
		t.Fatal(err)
	}
	// Adding user 3 is the stream's first entry (a system entry), the
	// message its second.
	msgs, err := b.History(ctx, g.ID, client.HistoryOptions{Limit: 10})
	if err != nil || len(msgs) != 2 || msgs[0].Kind != client.KindSystem || msgs[0].Action != "member.added" ||
		msgs[1].Seq != seq || msgs[1].Body != "hi team" {
		t.Fatalf("history: %+v %v", msgs, err)
	}
	r, err := b.MarkReadNow(ctx, g.ID, seq)
	if err != nil || !r.Advanced || r.LastReadSeq != seq {
		t.Fatalf("read: %+v %v", r, err)
	}
	if s, err := a.SeenBy(ctx, g.ID, seq); err != nil || s.SeenBy != 1 || s.Members != 2 {
		t.Fatalf("seen: %+v %v", s, err)
	}
	page, err := b.Inbox(ctx, client.InboxOptions{})
	if err != nil || len(page.Conversations) != 2 || page.Conversations[0].ID != g.ID || page.Conversations[0].LastMessage == nil {
		t.Fatalf("inbox: %+v %v", page, err)
	}
	if err := a.RemoveMember(ctx, g.ID, 3); err != nil {
		t.Fatalf("remove member: %v", err)
	}
	full, err := a.Conversation(ctx, g.ID)
	if err != nil || len(full.Members) != 2 {
		t.Fatalf("conversation: %+v %v", full, err)
	}
}

// TestUnackedSendSurvivesClientAndServerRestart: a message sent while chatd
// is down stays in the session dir; a new client on that dir sends it after
// chatd is back, and it is stored exactly once, as is one whose PUBACK was
// lost after it had been stored.
func TestUnackedSendSurvivesClientAndServerRestart(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url)
	a := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	conv := direct(t, a, 2)
	// A message that was stored but whose PUBACK the client never saw.
	lostAck := uuid.NewString()
	if _, err := a.SendWithID(ctxFor(t, 10*time.Second), conv, lostAck, "stored, ack lost"); err != nil {
		t.Fatal(err)
	}

	px := newProxy(t, srv.MQTTAddr())
	dir := t.TempDir()
	cfg := testConfig(t, px.URL(), 1)
	cfg.SessionDir = dir
	c1 := connect(t, cfg)

	stopNode(t, srv)
	testkit.WaitFor(t, 10*time.Second, "the client to lose chatd", func() bool { return !c1.Connected() })
	queuedCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c1.Send(queuedCtx, conv, "sent while chatd was down")
	if !errors.Is(err, client.ErrQueued) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send while down: %v, want ErrQueued and DeadlineExceeded", err)
	}
	pending := c1.Pending()
	if len(pending) != 1 {
		t.Fatalf("pending = %+v, want the one message", pending)
	}
	closeClient(t, c1)
	// Simulate the lost PUBACK: the journal still lists the stored message.
	line, _ := json.Marshal(map[string]any{"op": "send", "id": lostAck, "conv": conv, "body": "stored, ack lost", "at": time.Now().UTC()})
	f, err := os.OpenFile(filepath.Join(dir, "pending.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(append(line, '\n'))
	f.Close()

	srv2 := startNode(t, url)
	px.SetUpstream(srv2.MQTTAddr())
	cfg.Positions = map[int64]int64{conv: 1}
	c2 := connect(t, cfg)
	if c2.ClientID() == "" || !strings.HasPrefix(c2.ClientID(), "chatc-1-") {
		t.Errorf("client id %q not kept in the session dir", c2.ClientID())
	}
	testkit.WaitFor(t, 20*time.Second, "the queued messages to be acknowledged", func() bool { return len(c2.Pending()) == 0 })
	got := messages(t, c2, conv, 1, 10*time.Second)
	if got[0].Seq != 2 || got[0].ClientMsgID != pending[0].ClientMsgID || got[0].Body != "sent while chatd was down" {
		t.Fatalf("recovered message = %+v", got[0])
	}

	db := mustConn(t, url)
	for _, id := range []string{pending[0].ClientMsgID, lostAck} {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM message WHERE client_msg_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("message %s stored %d times, want once", id, n)
		}
	}
	var total int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM message WHERE conversation_id = $1`, conv).Scan(&total); err != nil || total != 2 {
		t.Errorf("conversation has %d messages (%v), want 2", total, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "pending.jsonl"))
	if len(bytes.TrimSpace(b)) != 0 {
		t.Errorf("journal not emptied: %s", b)
	}
}

func TestSessionDirIsLocked(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	cfg := testConfig(t, "mqtt://"+srv.MQTTAddr(), 1)
	cfg.SessionDir = t.TempDir()
	connect(t, cfg)
	if _, err := client.New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second client on the same dir: %v", err)
	}
}

func TestWebSocketBroker(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	a := connect(t, testConfig(t, "ws://"+srv.HTTPAddr()+"/mqtt", 1))
	conv := direct(t, a, 2)
	sendN(t, a, conv, 3, "over ws")
	messages(t, a, conv, 3, 10*time.Second)
}

func TestAwaitConnectionExplainsFailure(t *testing.T) {
	// Nothing listens on this port.
	ln := newProxy(t, "127.0.0.1:1")
	ln.Cut()
	ln.ln.Close()
	c, err := client.New(context.Background(), testConfig(t, ln.URL(), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(t, c)
	err = c.AwaitConnection(ctxFor(t, time.Second))
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitConnection = %v, want connection refused", err)
	}

	srv := startNode(t, pgtest.NewDB(t))
	cfg := testConfig(t, "mqtt://"+srv.MQTTAddr(), 1)
	cfg.Token = "not-a-jwt"
	bad, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(t, bad)
	err = bad.AwaitConnection(ctxFor(t, 10*time.Second))
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("bad token: %v, want ErrUnauthorized", err)
	}
	// A request fails the same way at once, not after its timeout: the
	// token will not be accepted later.
	start := time.Now()
	if _, err := bad.Inbox(ctxFor(t, 20*time.Second), client.InboxOptions{}); !errors.Is(err, client.ErrUnauthorized) || time.Since(start) > 5*time.Second {
		t.Fatalf("inbox with a refused token: %v after %v, want ErrUnauthorized at once", err, time.Since(start))
	}
}

func TestClosedClientRefusesWork(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	c := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	closeClient(t, c)
	if _, err := c.Send(context.Background(), 1, "x"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("send after close: %v", err)
	}
	if _, err := c.Inbox(context.Background(), client.InboxOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("inbox after close: %v", err)
	}
	if _, ok := <-c.Events(); ok {
		t.Error("events channel still open after Close")
	}
}
