package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testCtx bounds every test so a lock bug shows up as a failure, not a hang.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustExec runs one statement of a test's set-up and fails the test if it
// fails.
func mustExec(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("set up: %v", err)
	}
}

// newStore gives the test its own migrated database.
func newStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	return newStoreWithLimits(t, chat.DefaultLimits())
}

// groupOf12 is most tests' set-up: testCtx, a store of the test's own
// and a group that user 1 created with user 2.
func groupOf12(t *testing.T) (context.Context, *store.Store, *pgxpool.Pool, chat.Conversation) {
	t.Helper()
	ctx := testCtx(t)
	st, pool := newStore(t)
	return ctx, st, pool, mustGroup(t, st, 1, 2)
}

// newStoreWithLimits is newStore with limits l and the options given; the
// store is closed at the end of the test. Outbox rows are on, as a node
// with Kafka turns them on (store.WantOutbox), so the tests see every
// event's row; newStoreWithoutRelay is a store of a node without Kafka.
func newStoreWithLimits(t *testing.T, l chat.Limits, opts ...store.Option) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	st, pool := pgtest.NewStore(t, l, opts...)
	if err := store.WantOutboxRows(testCtx(t), pool); err != nil {
		t.Fatal(err)
	}
	return st, pool
}

// newStoreWithoutRelay is newStore on a database no relay reads: outbox
// rows off, as a fresh database without Kafka has them.
func newStoreWithoutRelay(t *testing.T, opts ...store.Option) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	return pgtest.NewStore(t, chat.DefaultLimits(), opts...)
}

// newStoreRecording is newStore with rec as the store's publisher.
func newStoreRecording(t *testing.T, rec *publishRecorder) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	return newStoreWithLimits(t, chat.DefaultLimits(), store.WithPublisher(rec))
}

// publishRecorder is a chat.Publisher that keeps the published events of
// the listed types (all when types is empty) and tells each to each.
type publishRecorder struct {
	types []string
	each  func(chat.Event)
	mu    sync.Mutex
	evs   []chat.Event
}

func (p *publishRecorder) Publish(evs ...chat.Event) {
	for _, ev := range evs {
		if len(p.types) > 0 && !slices.Contains(p.types, ev.Type) {
			continue
		}
		p.mu.Lock()
		p.evs = append(p.evs, ev)
		p.mu.Unlock()
		if p.each != nil {
			p.each(ev)
		}
	}
}

func (p *publishRecorder) events() []chat.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chat.Event(nil), p.evs...)
}

func mustGroup(t *testing.T, st *store.Store, creator int64, members ...int64) chat.Conversation {
	t.Helper()
	conv, _, err := st.CreateGroup(testCtx(t), chat.GroupRequest{CreatorID: creator, Title: "group", Members: members})
	if err != nil {
		t.Fatalf("create group: %v", err)
	}
	return conv
}

func sendReq(conv, sender int64, body string) chat.SendRequest {
	return chat.SendRequest{ConversationID: conv, SenderID: sender, ClientMsgID: uuid.NewString(), Body: body}
}

// filesReq is sendReq with the files refs.
func filesReq(conv, sender int64, body string, refs []chat.AttachmentRef) chat.SendRequest {
	req := sendReq(conv, sender, body)
	req.Attachments = refs
	return req
}

// forwardReq is a send to conv as sender forwarding message seq of
// conversation from.
func forwardReq(conv, sender, from, seq int64) chat.SendRequest {
	req := sendReq(conv, sender, "")
	req.Forward = &chat.MessageRef{ConversationID: from, Seq: seq}
	return req
}

func mustSend(t *testing.T, st *store.Store, conv, sender int64, body string) chat.Message {
	t.Helper()
	return mustSendReq(t, st, sendReq(conv, sender, body))
}

// mustSendFiles sends body with the uploads of refs to conv as sender.
func mustSendFiles(t *testing.T, st *store.Store, conv, sender int64, body string, refs []chat.AttachmentRef) chat.Message {
	t.Helper()
	return mustSendReq(t, st, filesReq(conv, sender, body, refs))
}

func mustSendReq(t *testing.T, st *store.Store, req chat.SendRequest) chat.Message {
	t.Helper()
	res, err := st.Send(testCtx(t), req)
	if err != nil {
		t.Fatalf("send to %d as %d: %v", req.ConversationID, req.SenderID, err)
	}
	if res.Duplicate {
		t.Fatalf("fresh clientMsgId reported as duplicate")
	}
	return res.Message
}

// mustHistory is q's page of history.
func mustHistory(t *testing.T, st *store.Store, q chat.HistoryQuery) []chat.Message {
	t.Helper()
	page, err := st.History(testCtx(t), q)
	if err != nil {
		t.Fatalf("history %+v: %v", q, err)
	}
	return page
}

// mustReply sends body to conv as sender, replying to message seq to.
func mustReply(t *testing.T, st *store.Store, conv, sender int64, body string, to int64) chat.Message {
	t.Helper()
	req := sendReq(conv, sender, body)
	req.ReplyTo = to
	res, err := st.Send(testCtx(t), req)
	if err != nil {
		t.Fatalf("reply to %d:%d as %d: %v", conv, to, sender, err)
	}
	return res.Message
}

// mustAdd adds user to conv as actor, with role ("" for a member).
func mustAdd(t *testing.T, ctx context.Context, st *store.Store, conv, actor, user int64, role chat.Role) {
	t.Helper()
	if _, _, err := st.AddMember(ctx, conv, actor, user, role); err != nil {
		t.Fatalf("add %d to %d as %d: %v", user, conv, actor, err)
	}
}

// mustMarkRead marks conv read by user up to seq.
func mustMarkRead(t *testing.T, ctx context.Context, st *store.Store, conv, user, seq int64) {
	t.Helper()
	if _, err := st.MarkRead(ctx, conv, user, seq); err != nil {
		t.Fatalf("mark %d:%d read by %d: %v", conv, seq, user, err)
	}
}

// wantSeen fails the test unless viewer's "seen by" of message seq in
// conv is want; what names the moment in a failure.
func wantSeen(t *testing.T, ctx context.Context, st *store.Store, conv, viewer, seq int64, want chat.SeenResult, what string) {
	t.Helper()
	got, err := st.SeenBy(ctx, conv, viewer, seq)
	if err != nil {
		t.Fatalf("%s: seen by for seq %d: %v", what, seq, err)
	}
	if got != want {
		t.Fatalf("%s: seen by for seq %d: got %+v, want %+v", what, seq, got, want)
	}
}

// mustRemove removes user from conv as actor; what names the removal in
// a failure.
func mustRemove(t *testing.T, ctx context.Context, st *store.Store, conv, actor, user int64, what string) {
	t.Helper()
	if err := st.RemoveMember(ctx, conv, actor, user); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// mustTransfer hands conv's ownership from one member to another.
func mustTransfer(t *testing.T, ctx context.Context, st *store.Store, conv, from, to int64, what string) {
	t.Helper()
	if err := st.TransferOwnership(ctx, conv, from, to); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sendN sends n messages of body to conv as sender.
func sendN(t *testing.T, st *store.Store, conv, sender int64, n int, body string) {
	t.Helper()
	for range n {
		mustSend(t, st, conv, sender, body)
	}
}

func wantCode(t *testing.T, what string, err error, code chat.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %s", what, code)
	}
	if got := chat.ErrorCode(err); got != code {
		t.Fatalf("%s: got %s (%v), want %s", what, got, err, code)
	}
}

func queryInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	return pgtest.QueryOne[int64](t, pool, sql, args...)
}

// outboxEvents returns the conversation's outbox events of one type (all
// types when typ is empty) in outbox order, checking each row's key. A row
// that references an entry is that entry's event as the relay encodes it:
// from the entry as it is now (Sessions.Entries).
func outboxEvents(t *testing.T, pool *pgxpool.Pool, conv int64, typ string) []chat.Event {
	t.Helper()
	rows, err := pool.Query(testCtx(t), `
		SELECT msg_key, payload::text, conversation_id, seq FROM outbox
		WHERE msg_key = $1::bigint::text AND ($2 = '' OR type = $2)
		ORDER BY id`, conv, typ)
	if err != nil {
		t.Fatalf("read outbox: %v", err)
	}
	type row struct {
		payload *string
		ref     *chat.MessageRef
	}
	var all []row
	var refs []chat.MessageRef
	for rows.Next() {
		var key string
		var r row
		var c, q *int64
		if err := rows.Scan(&key, &r.payload, &c, &q); err != nil {
			t.Fatalf("scan outbox: %v", err)
		}
		if want := jsonInt(conv); key != want {
			t.Fatalf("outbox msg_key = %q, want %q", key, want)
		}
		if r.payload == nil {
			if c == nil || q == nil {
				t.Fatalf("outbox row of %s has neither payload nor entry", key)
			}
			r.ref = &chat.MessageRef{ConversationID: *c, Seq: *q}
			refs = append(refs, *r.ref)
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatalf("read outbox: %v", err)
	}
	entries, err := store.NewSessions(pool).Entries(testCtx(t), refs)
	if err != nil {
		t.Fatalf("read outbox entries: %v", err)
	}
	var evs []chat.Event
	for _, r := range all {
		var ev chat.Event
		if r.payload != nil {
			if err := json.Unmarshal([]byte(*r.payload), &ev); err != nil {
				t.Fatalf("decode outbox payload %s: %v", *r.payload, err)
			}
		} else {
			m, ok := entries[*r.ref]
			if !ok {
				t.Fatalf("outbox row references entry %+v, which is not stored", *r.ref)
			}
			ev = chat.EntryEvent(m.UTC())
		}
		evs = append(evs, ev)
	}
	return evs
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func member(t *testing.T, st *store.Store, conv, viewer, user int64) chat.Member {
	t.Helper()
	c, err := st.GetConversation(testCtx(t), conv, viewer)
	if err != nil {
		t.Fatalf("get conversation: %v", err)
	}
	for _, m := range c.Members {
		if m.UserID == user {
			return m
		}
	}
	t.Fatalf("user %d is not a member of %d", user, conv)
	return chat.Member{}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, what, cond)
}

// scanAll reads every row of rows into a T, scanning into the fields
// fields names; an error fails the test.
func scanAll[T any](t *testing.T, rows pgx.Rows, fields func(*T) []any) []T {
	t.Helper()
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) {
		var v T
		err := row.Scan(fields(&v)...)
		return v, err
	})
	if err != nil {
		t.Fatalf("read rows: %v", err)
	}
	return out
}

// concurrently calls f(0) to f(n-1) in n goroutines released together,
// so that they race, and returns their errors by i.
func concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// tally counts the outcomes of racing calls: ok the nil errors, refused
// those that refusal expects. Any other error fails the test (what names
// the calls).
func tally(t *testing.T, what string, errs []error, refusal func(error) bool) (ok, refused int) {
	t.Helper()
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case refusal(err):
			refused++
		default:
			t.Fatalf("%s: %v", what, err)
		}
	}
	return ok, refused
}

func isCode(err error, code chat.Code) bool {
	var ce *chat.Error
	return errors.As(err, &ce) && ce.Code == code
}

// sameMessage compares messages, instants by value (time zones may differ).
func sameMessage(a, b chat.Message) bool {
	return a.ConversationID == b.ConversationID && a.Seq == b.Seq && a.SenderID == b.SenderID &&
		a.ClientMsgID == b.ClientMsgID && a.Body == b.Body && a.CreatedAt.Equal(b.CreatedAt)
}

// migrateBefore brings a fresh database to the schema chatd had before
// migration v (the migrations below it, recorded as store.Migrate records
// them) and returns migration v.
func migrateBefore(t *testing.T, ctx context.Context, pool *pgxpool.Pool, v int) store.Migration {
	t.Helper()
	ms, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, ctx, pool, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(), sha256 text)`)
	for _, m := range ms {
		if m.Version >= v {
			if m.Version != v {
				break
			}
			return m
		}
		mustExec(t, ctx, pool, m.SQL)
		mustExec(t, ctx, pool, `INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)`, m.Version, m.Name, m.Checksum)
	}
	t.Fatalf("no migration %d", v)
	return store.Migration{}
}
