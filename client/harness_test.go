package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// startNode starts a chatd node on loopback ports against the database url.
// The node is closed at the end of the test (Close is idempotent, so tests
// may stop it earlier).
func startNode(t *testing.T, url string) *server.Server {
	t.Helper()
	return testnode.Start(t, testnode.SecretEnv(t, url), nil)
}

// nodeOn starts a node on the database at url; broker is its MQTT URL.
func nodeOn(t *testing.T, url string) (srv *server.Server, broker string) {
	t.Helper()
	srv = startNode(t, url)
	return srv, "mqtt://" + srv.MQTTAddr()
}

// newBroker starts a node on a database of its own and returns its MQTT
// URL.
func newBroker(t *testing.T) string {
	t.Helper()
	_, broker := nodeOn(t, pgtest.NewDB(t))
	return broker
}

// sender starts a node (its MQTT URL is broker) and connects user 1 (a)
// to it, with a's direct conversation conv with user 2.
func sender(t *testing.T) (srv *server.Server, broker string, a *client.Client, conv int64) {
	t.Helper()
	srv, broker = nodeOn(t, pgtest.NewDB(t))
	a = connect(t, testConfig(t, broker, 1))
	return srv, broker, a, direct(t, a, 2)
}

// pair is sender with user 2 (b) connected too.
func pair(t *testing.T) (a, b *client.Client, conv int64) {
	t.Helper()
	_, broker, a, conv := sender(t)
	return a, connect(t, testConfig(t, broker, 2)), conv
}

// dropMessages makes c lose the message.new events of seqs from..to on
// the way in, as a lossy network would.
func dropMessages(c *client.Client, from, to int64) {
	c.DropEvents(func(p []byte) bool {
		var ev client.Event
		_ = json.Unmarshal(p, &ev)
		return ev.Type == client.EventMessageNew && ev.Seq >= from && ev.Seq <= to
	})
}

func stopNode(t *testing.T, srv *server.Server) {
	t.Helper()
	closeWithin(t, "stop chatd", 20*time.Second, srv.Close)
}

// closeWithin runs close with a deadline of d; a failure is logged as
// what, since a test's clean-up has nothing left to check.
func closeWithin(t *testing.T, what string, d time.Duration, close func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := close(ctx); err != nil {
		t.Logf("%s: %v", what, err)
	}
}

// groupOf12 is a group that user 1 created on srv with user 2.
func groupOf12(t *testing.T, srv *server.Server) chat.Conversation {
	t.Helper()
	g, err := srv.Service.CreateGroup(context.Background(), 1, "g", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// connectHTTP connects user to srv's MQTT listener, with the client's
// HTTP requests (uploads, downloads) going to httpURL: srv's own HTTP
// listener or a proxy in front of it.
func connectHTTP(t *testing.T, srv *server.Server, user int64, httpURL string) *client.Client {
	t.Helper()
	cfg := testConfig(t, "mqtt://"+srv.MQTTAddr(), user)
	cfg.HTTPURL = httpURL
	return connect(t, cfg)
}

// sendUpload has c send a to conv in a message without text; what says
// which send failed.
func sendUpload(t *testing.T, ctx context.Context, c *client.Client, conv int64, a client.Attachment, what string) {
	t.Helper()
	if _, err := c.SendMessage(ctx, conv, "", client.SendOptions{Attachments: []client.AttachmentRef{a.Ref()}}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// testConfig is a client config for user against broker; fast reconnects.
func testConfig(t *testing.T, broker string, user int64) client.Config {
	return client.Config{
		Brokers:           []string{broker},
		UserID:            user,
		Token:             testnode.Token(t, user),
		MaxReconnectDelay: 300 * time.Millisecond,
		RequestTimeout:    10 * time.Second,
		Logger:            slog.New(slog.DiscardHandler),
	}
}

// connect starts a client and waits for its first connection; it is
// closed at the end of the test.
func connect(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatalf("new client for user %d: %v", cfg.UserID, err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	if err := c.AwaitConnection(ctx); err != nil {
		t.Fatalf("client for user %d: %v", cfg.UserID, err)
	}
	return c
}

// caughtUp waits until the catch-up of c's connection, which connect
// waited for, is done. A client without a server session reads the inbox
// at every connection, and what it lists ahead of Positions is filled
// from history: messages sent before that read are not handed on live.
// The catch-up runs on the dispatcher's goroutine, queued ahead of any
// event that arrives once the connection is up, so a marker injected now
// comes out of Events after it. With a server session the inbox is read
// beside the events: the marker does not say the read is done. A message
// before the marker fails the test, since the caller would not see it.
func caughtUp(t *testing.T, c *client.Client) {
	t.Helper()
	const marker = -7 // no user's id: this typing event is the marker
	c.InjectEvent(fmt.Appendf(nil, `{"type":"typing","conversationId":1,"userId":%d}`, marker))
	if !watchEvents(t, c, 15*time.Second, func(ev client.Event) bool {
		if ev.Type == client.EventMessageNew {
			t.Fatalf("message seq %d of conversation %d before the catch-up was done", ev.Seq, ev.ConversationID)
		}
		return ev.Type == client.EventTyping && ev.UserID == marker
	}) {
		t.Fatal("the connection's catch-up was not done within 15s")
	}
}

func closeClient(t *testing.T, c *client.Client) {
	t.Helper()
	closeWithin(t, "close client", 10*time.Second, c.Close)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// messages reads message.new events of conv from c until n arrived,
// failing on anything out of order or repeated.
func messages(t *testing.T, c *client.Client, conv int64, n int, timeout time.Duration) []client.Event {
	t.Helper()
	var out []client.Event
	if n > 0 && !watchEvents(t, c, timeout, func(ev client.Event) bool {
		if ev.Type != client.EventMessageNew || ev.ConversationID != conv {
			return false
		}
		if len(out) > 0 && ev.Seq != out[len(out)-1].Seq+1 {
			t.Fatalf("message seq %d after %d: order or exactly-once broken", ev.Seq, out[len(out)-1].Seq)
		}
		out = append(out, ev)
		return len(out) == n
	}) {
		t.Fatalf("got %d/%d messages of conversation %d within %v", len(out), n, conv, timeout)
	}
	return out
}

// noMoreMessages asserts that no message.new of conv arrives within d.
func noMoreMessages(t *testing.T, c *client.Client, conv int64, d time.Duration) {
	t.Helper()
	watchEvents(t, c, d, func(ev client.Event) bool {
		if ev.Type == client.EventMessageNew && ev.ConversationID == conv {
			t.Fatalf("unexpected message seq %d (a duplicate?)", ev.Seq)
		}
		return false
	})
}

// nextEvent waits for the next event of type typ.
func nextEvent(t *testing.T, c *client.Client, typ string, timeout time.Duration) client.Event {
	t.Helper()
	var got client.Event
	if !watchEvents(t, c, timeout, func(ev client.Event) bool {
		got = ev
		return ev.Type == typ
	}) {
		t.Fatalf("no %s event within %v", typ, timeout)
	}
	return got
}

// watchEvents hands c's events to f until f reports it is done (true) or
// timeout passes (false). The events closing fails the test: no more
// will come.
func watchEvents(t *testing.T, c *client.Client, timeout time.Duration, f func(client.Event) (done bool)) bool {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed")
			}
			if f(ev) {
				return true
			}
		case <-deadline.C:
			return false
		}
	}
}

func mustConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// messageCount is how many messages conversation conv holds.
func messageCount(t *testing.T, db *pgx.Conn, conv int64) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM message WHERE conversation_id = $1`, conv).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCommitted waits up to 10 s for conversation conv, in the database
// at url, to hold a message: the send that a test cut short committed.
func waitCommitted(t *testing.T, url string, conv int64) {
	t.Helper()
	db := mustConn(t, url)
	testkit.WaitFor(t, 10*time.Second, "the message to be committed", func() bool { return messageCount(t, db, conv) > 0 })
}

// storedOnce fails t unless conversation conv holds exactly one message.
func storedOnce(t *testing.T, url string, conv int64) {
	t.Helper()
	if n := messageCount(t, mustConn(t, url), conv); n != 1 {
		t.Fatalf("conversation holds %d messages, want 1", n)
	}
}

// proxy is a TCP proxy between clients and chatd that a test can cut: it
// stands for the network, so the client sees real connection losses.
type proxy struct {
	ln       net.Listener
	mu       sync.Mutex
	upstream string
	down     bool
	stall    bool // drop what chatd writes (Stall)
	stallUp  bool // drop what clients write (StallUp)
	dropped  int  // bytes of clients dropped by StallUp
	conns    map[net.Conn]struct{}
	accepted int // connections accepted, refused ones included
	wg       sync.WaitGroup
}

func newProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Kill()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) URL() string { return "mqtt://" + p.ln.Addr().String() }

// cutOff cuts user 2's client b off through p and waits until b knows it.
func cutOff(t *testing.T, p *proxy, b *client.Client) {
	t.Helper()
	p.Cut()
	testkit.WaitFor(t, 10*time.Second, "user 2 to go offline", func() bool { return !b.Connected() })
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down, up := p.down, p.upstream
		p.accepted++
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", up, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c, false)
		go p.pipe(c, u, true)
	}
}

// pipe copies src to dst; back is the way from chatd to the client, which
// Stall empties.
func (p *proxy) pipe(dst, src net.Conn, back bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		drop := back && p.stall || !back && p.stallUp
		if drop && !back {
			p.dropped += n
		}
		p.mu.Unlock()
		if n > 0 && !drop {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Stall drops everything chatd writes from now on (a PUBACK lost on the
// way), until Kill.
func (p *proxy) Stall() {
	p.mu.Lock()
	p.stall = true
	p.mu.Unlock()
}

// StallUp drops everything clients write from now on (a request lost on
// the way), until Kill.
func (p *proxy) StallUp() {
	p.mu.Lock()
	p.stallUp = true
	p.mu.Unlock()
}

// Dropped is the number of bytes StallUp dropped so far.
func (p *proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Kill closes every open connection (no DISCONNECT: a lost network) and
// ends a Stall or StallUp; new connections are still accepted.
func (p *proxy) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall, p.stallUp = false, false
	for c := range p.conns {
		c.Close()
	}
}

// Cut kills every connection and refuses new ones until Resume.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Kill()
}

func (p *proxy) Resume() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Accepted is the number of connections clients opened so far.
func (p *proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// SetUpstream points new connections at another chatd.
func (p *proxy) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
}

// sent is what a Send answered.
type sent struct {
	seq int64
	err error
}

// sendAsync sends body into conv on a goroutine, waiting at most within,
// and hands its answer over once.
func sendAsync(t *testing.T, c *client.Client, conv int64, body string, within time.Duration) <-chan sent {
	res := make(chan sent, 1)
	go func() {
		seq, err := c.Send(ctxFor(t, within), conv, body)
		res <- sent{seq, err}
	}()
	return res
}

// handOwedEntry injects a message.new of seq in conv, as a redelivery of
// an entry the user's leave still owed, and waits until the dispatcher
// has handed it on (a typing event injected after it comes out). The
// entry is the user's: it must be handed on whatever Positions says.
func handOwedEntry(t *testing.T, c *client.Client, conv, seq int64) {
	t.Helper()
	c.InjectEvent(fmt.Appendf(nil, `{"type":"message.new","conversationId":%d,"seq":%d,"senderId":1,"clientMsgId":%q,"body":"owed","createdAt":"2026-01-01T00:00:00Z"}`,
		conv, seq, uuid.NewString()))
	c.InjectEvent([]byte(`{"type":"typing","conversationId":1,"userId":1}`))
	handed := false
	if !watchEvents(t, c, 10*time.Second, func(ev client.Event) bool {
		if ev.Type == client.EventMessageNew && ev.ConversationID == conv && ev.Seq == seq {
			handed = true
		}
		return ev.Type == client.EventTyping
	}) {
		t.Fatalf("the typing event after the owed entry %d did not come within 10s", seq)
	}
	if !handed {
		t.Fatalf("the owed entry %d was not handed on", seq)
	}
}
