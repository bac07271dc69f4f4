package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// sendBatchArgs is chat_send_batch's signature, which
// chat_send_batch_plain shares.
const sendBatchArgs = `(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[], jsonb[], text[])`

// lifecycleMarker is the rule functions.sql makes chat_send_batch_plain
// by: every /*lifecycle:*/X/*plain:Y*/ becomes Y.
var lifecycleMarker = regexp.MustCompile(`(?s)/\*lifecycle:\*/.*?/\*plain:(.*?)\*/`)

func functionDef(t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var def string
	if err := pool.QueryRow(testCtx(t), `SELECT pg_get_functiondef(($1 || $2)::regprocedure)`, name, sendBatchArgs).Scan(&def); err != nil {
		t.Fatalf("definition of %s: %v", name, err)
	}
	return def
}

// TestPlainSendFunctionIsTheFullOneWithoutTheLifecycle: the plain batch's
// function is chat_send_batch's text with the lifecycle's parts replaced
// as marked, nothing else, so no rule of a send can be edited in one and
// not the other; and what it leaves of the deciding statement carries
// none of the lifecycle's arguments or outcomes, which is what it is for.
func TestPlainSendFunctionIsTheFullOneWithoutTheLifecycle(t *testing.T) {
	t.Parallel()
	deciding := derivedDeciding(t, pgtest.NewPool(t), "chat_send_batch", "chat_send_batch_plain", lifecycleMarker, "/*lifecycle:*/", "/*plain:")
	for _, name := range []string{"p_target", "p_fwd_conv", "p_fwd_seq", "p_emoji", "p_on", "v_ref", "v_recall_", "v_total",
		"v_f_msg_type", ".tgt", ".fc", ".fs", ".emoji", ".is_on", "outsider", ".cnt"} {
		if strings.Contains(deciding, name) {
			t.Errorf("chat_send_batch_plain's deciding statement still holds %q", name)
		}
	}
}

// derivedDeciding checks that the database's function derived is base's
// text with every open X close Y*/ part made Y (rule, the regexp
// functions.sql's DO block applies, written again independently), nothing
// else; that the markers in functions.sql come in pairs (one left unclosed
// would take the text up to the next pair's close with it); and returns
// derived's deciding statement.
func derivedDeciding(t *testing.T, pool *pgxpool.Pool, base, derived string, rule *regexp.Regexp, open, close string) string {
	t.Helper()
	baseDef, def := functionDef(t, pool, base), functionDef(t, pool, derived)
	want := rule.ReplaceAllString(strings.Replace(baseDef, base+"(", derived+"(", 1), "$1")
	if def != want {
		t.Fatalf("%s is not %s with its %sX%sY*/ parts made Y:\n%s", derived, base, open, close, firstDifference(def, want))
	}

	functions, err := store.Functions()
	if err != nil {
		t.Fatal(err)
	}
	tokens := regexp.MustCompile(regexp.QuoteMeta(open)+"|"+regexp.QuoteMeta(close)).FindAllString(functions, -1)
	for i, tok := range tokens {
		if want := []string{open, close}[i%2]; tok != want {
			t.Fatalf("functions.sql: marker %d is %q, want %q (every %s closes with a %s...*/ before the next)", i, tok, want, open, close)
		}
	}
	if len(tokens) == 0 || len(tokens)%2 != 0 {
		t.Fatalf("functions.sql: %d markers", len(tokens))
	}

	start, end := strings.Index(def, "WITH req AS"), strings.Index(def, "FROM dec d;")
	if start < 0 || end < start {
		t.Fatalf("%s: no deciding statement (WITH req AS ... FROM dec d;)", derived)
	}
	return def[start:end]
}

// firstDifference shows where a and b part.
func firstDifference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-200)
	return fmt.Sprintf("got  ...%s\nwant ...%s", a[from:min(len(a), i+200)], b[from:min(len(b), i+200)])
}

// TestAPlainBatchNeverRunsTheFullSendFunction: with chat_send_batch made
// to fail, plain sends and system entries still commit (they run
// chat_send_batch_plain), while a reply, which the plain function
// refuses, runs the full one and fails.
func TestAPlainBatchNeverRunsTheFullSendFunction(t *testing.T) {
	t.Parallel()
	ctx, pool, st := storeOfItsOwn(t)
	failFunction(t, ctx, pool, "chat_send_batch", "the full send function ran")

	g := mustGroup(t, st, 1, 2) // writes its system entries
	mustAdd(t, ctx, st, g.ID, 1, 3, chat.RoleMember)
	m := mustSend(t, st, g.ID, 1, "a plain send")
	req := sendReq(g.ID, 2, "a reply")
	req.ReplyTo = m.Seq
	if _, err := st.Send(ctx, req); err == nil {
		t.Fatal("a reply committed with chat_send_batch failing: it did not run the full function")
	}
}

// plainBatch is one call's parallel arrays.
type plainBatch struct {
	kind, body, emoji, trace []string
	conv, sender, target     []int64
	id                       []string
	fwdConv, fwdSeq          []*int64
	on                       []bool
	att                      []*string
}

func (b *plainBatch) add(kind string, conv, sender int64, id, body string) {
	b.kind, b.conv, b.sender, b.id, b.body = append(b.kind, kind), append(b.conv, conv), append(b.sender, sender), append(b.id, id), append(b.body, body)
	b.target, b.fwdConv, b.fwdSeq = append(b.target, 0), append(b.fwdConv, nil), append(b.fwdSeq, nil)
	b.emoji, b.on, b.trace, b.att = append(b.emoji, ""), append(b.on, false), append(b.trace, ""), append(b.att, nil)
}

// callBatch runs fn on b in a transaction it rolls back, and returns its
// answer and what it wrote to the conversations convs, as JSON, times
// written by the call shown as "new" (two calls differ only in them).
func callBatch(t *testing.T, pool *pgxpool.Pool, fn string, b plainBatch, convs []int64) (answer, written string, err error) {
	t.Helper()
	ctx := testCtx(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var t0 time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&t0); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT to_jsonb(a) FROM `+fn+`($1, $2, $3, $4::uuid[], $5, $6, $7, $8, $9, $10, NULL, NULL, $11, $12, $13::jsonb[], $14) a`,
		b.kind, b.conv, b.sender, b.id, b.body, b.target, b.fwdConv, b.fwdSeq, b.emoji, b.on, b.trace, b.trace, b.att, chat.DefaultUploadTypes)
	if err != nil {
		return "", "", err
	}
	answers, err := pgx.CollectRows(rows, pgx.RowTo[map[string]any])
	if err != nil {
		return "", "", err
	}
	var rowsJSON []map[string]any
	for _, q := range []string{
		`SELECT to_jsonb(m) FROM message m WHERE conversation_id = ANY($1) ORDER BY conversation_id, seq`,
		`SELECT to_jsonb(o) - 'id' FROM outbox o WHERE conversation_id = ANY($1) ORDER BY id`,
		`SELECT to_jsonb(c) FROM conversation c WHERE id = ANY($1) ORDER BY id`,
		`SELECT to_jsonb(m) FROM conversation_member m WHERE conversation_id = ANY($1) ORDER BY conversation_id, user_id`,
	} {
		rs, err := tx.Query(ctx, q, convs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rs, pgx.RowTo[map[string]any])
		if err != nil {
			t.Fatal(err)
		}
		rowsJSON = append(rowsJSON, got...)
	}
	return newTimes(t, answers, t0), newTimes(t, rowsJSON, t0), nil
}

// newTimes encodes rows as JSON lines, every time at or after t0 as "new".
func newTimes(t *testing.T, rows []map[string]any, t0 time.Time) string {
	t.Helper()
	var sb strings.Builder
	for _, r := range rows {
		for k, v := range r {
			if s, ok := v.(string); ok {
				if at, err := time.Parse(time.RFC3339Nano, s); err == nil && !at.Before(t0) {
					r[k] = "new"
				}
			}
		}
		j, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(j)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// TestThePlainSendFunctionAnswersAndWritesAsTheFullOne: the same plain
// batch, every outcome a plain change can have in it, through either
// function gives the same answer and writes the same entries, outbox
// rows, conversation rows (last_seq, message count) and watermarks; and
// the plain function refuses a batch with a reply rather than write it
// as a plain message.
func TestThePlainSendFunctionAnswersAndWritesAsTheFullOne(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	mustAdd(t, ctx, st, g.ID, 1, 3, chat.RoleMember)
	h, k := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 2)
	if err := st.Block(ctx, 5, 4, 100); err != nil {
		t.Fatal(err)
	}
	d, _, err := st.OpenDirect(ctx, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	m1 := mustSend(t, st, g.ID, 1, "first")
	reply := mustReply(t, st, g.ID, 2, "a reply", m1.Seq)
	fwd, err := st.Send(ctx, forwardReq(g.ID, 1, g.ID, m1.Seq))
	if err != nil {
		t.Fatal(err)
	}
	m2 := mustSend(t, st, g.ID, 2, "taken back")
	mustChange(t, st, change(chat.KindRecall, g.ID, 2, m2.Seq))
	m3 := mustSend(t, st, g.ID, 3, "before leaving")
	mustRemove(t, ctx, st, g.ID, 1, 3, "user 3")

	var b plainBatch
	n1, n2 := uuid.NewString(), uuid.NewString()
	b.add("message", g.ID, 1, n1, "new")
	b.trace[0] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	b.add("message", g.ID, 2, n2, "new too")
	b.add("message", g.ID, 1, n1, "new")                    // a repeat within the batch
	b.add("message", g.ID, 2, n1, "another's")              // its clientMsgId by another sender
	b.add("message", g.ID, 1, m1.ClientMsgID, "first")      // a resend
	b.add("message", g.ID, 2, m2.ClientMsgID, "taken back") // a resend of a message recalled since
	b.add("message", g.ID, 2, reply.ClientMsgID, "a reply") // a reply's clientMsgId, not replying
	b.add("message", g.ID, 1, fwd.Message.ClientMsgID, "")  // a forward's, not forwarding
	b.add("message", g.ID, 2, m1.ClientMsgID, "first")      // another's message's
	b.add("message", g.ID, 9, uuid.NewString(), "not a member")
	b.add("message", 1<<40, 1, uuid.NewString(), "nowhere")
	b.add("message", d.ID, 4, uuid.NewString(), "blocked")
	b.add("message", g.ID, 3, m3.ClientMsgID, "before leaving") // a resend by a removed member
	b.add("message", g.ID, 3, uuid.NewString(), "after leaving")
	b.add("system", h.ID, 1, uuid.NewString(), `{"type":"test"}`)
	b.add("message", k.ID, 1, uuid.NewString(), "with a file")
	unknown := `[{"uploadId":"aaaaaaaaaaaaaaaaaaaaaaaaaa"}]`
	b.att[len(b.att)-1] = &unknown
	convs := []int64{g.ID, h.ID, k.ID, d.ID}

	// The batch holds every outcome it claims to.
	statuses := sameAnswers(t, pool, "chat_send_batch", "chat_send_batch_plain", b, convs, 6)
	if want := []int{0, 0, 1, 2, 1, 1, 2, 2, 2, 3, 4, 22, 1, 3, 0, 14}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("outcomes %v, want %v", statuses, want)
	}

	b.target[1] = m1.Seq
	if _, _, err := callBatch(t, pool, "chat_send_batch_plain", b, convs); err == nil || !strings.Contains(err.Error(), "reply or forward") {
		t.Errorf("chat_send_batch_plain with a reply in the batch: %v, want it refused", err)
	}
}

// batchMarker is the rule functions.sql makes
// chat_send_batch_plain_distinct by from chat_send_batch_plain: every
// /*batch:*/X/*distinct:Y*/ becomes Y.
var batchMarker = regexp.MustCompile(`(?s)/\*batch:\*/.*?/\*distinct:(.*?)\*/`)

// TestTheDistinctSendFunctionIsThePlainOneWithoutTheWindows: the function
// of a plain batch whose conversations are all different is the plain
// one's text with the windows' and groupings' parts replaced as marked,
// nothing else; and its deciding statement has no window or grouping
// left, which is what it is for.
func TestTheDistinctSendFunctionIsThePlainOneWithoutTheWindows(t *testing.T) {
	t.Parallel()
	deciding := derivedDeciding(t, pgtest.NewPool(t), "chat_send_batch_plain", "chat_send_batch_plain_distinct", batchMarker, "/*batch:*/", "/*distinct:")
	for _, s := range []string{" OVER ", "WINDOW ", "GROUP BY f.", "count("} {
		if strings.Contains(deciding, s) {
			t.Errorf("chat_send_batch_plain_distinct's deciding statement still holds %q", s)
		}
	}
}

// TestTheDistinctSendFunctionAnswersAndWritesAsThePlainOne: a plain batch
// with one change in each conversation, every outcome a plain change can
// have among them, gives the same answer and writes the same rows through
// chat_send_batch_plain and chat_send_batch_plain_distinct; and the
// distinct one fails, writing nothing, on a batch with two new messages
// in one conversation, where it would give both the same seq.
func TestTheDistinctSendFunctionAnswersAndWritesAsThePlainOne(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	group := func() int64 { return mustGroup(t, st, 1, 2).ID }
	if err := st.Block(ctx, 5, 4, 100); err != nil {
		t.Fatal(err)
	}
	d, _, err := st.OpenDirect(ctx, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	resent, conflict, recalled, replied, forwarded, left := group(), group(), group(), group(), group(), group()
	m1 := mustSend(t, st, resent, 1, "first")
	m2 := mustSend(t, st, conflict, 1, "another's")
	m3 := mustSend(t, st, recalled, 2, "taken back")
	mustChange(t, st, change(chat.KindRecall, recalled, 2, m3.Seq))
	reply := mustReply(t, st, replied, 2, "a reply", mustSend(t, st, replied, 1, "replied to").Seq)
	fwd, err := st.Send(ctx, forwardReq(forwarded, 1, resent, m1.Seq))
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, ctx, st, left, 1, 3, chat.RoleMember)
	m4 := mustSend(t, st, left, 3, "before leaving")
	mustRemove(t, ctx, st, left, 1, 3, "user 3")

	var b plainBatch
	b.add("message", g.ID, 1, uuid.NewString(), "new")
	b.trace[0] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	b.add("message", resent, 1, m1.ClientMsgID, "first")        // a resend
	b.add("message", conflict, 2, m2.ClientMsgID, "another's")  // another's message's clientMsgId
	b.add("message", recalled, 2, m3.ClientMsgID, "taken back") // a resend of a message recalled since
	b.add("message", replied, 2, reply.ClientMsgID, "a reply")  // a reply's clientMsgId, not replying
	b.add("message", forwarded, 1, fwd.Message.ClientMsgID, "") // a forward's, not forwarding
	b.add("message", left, 3, m4.ClientMsgID, "before leaving") // a resend by a removed member
	b.add("message", group(), 9, uuid.NewString(), "not a member")
	b.add("message", 1<<40, 1, uuid.NewString(), "nowhere")
	b.add("message", d.ID, 4, uuid.NewString(), "blocked")
	b.add("system", group(), 1, uuid.NewString(), `{"type":"test"}`)
	k := group()
	b.add("message", k, 1, uuid.NewString(), "with a file")
	unknown := `[{"uploadId":"aaaaaaaaaaaaaaaaaaaaaaaaaa"}]`
	b.att[len(b.att)-1] = &unknown
	convs := slices.Clone(b.conv)

	statuses := sameAnswers(t, pool, "chat_send_batch_plain", "chat_send_batch_plain_distinct", b, convs, 4)
	if want := []int{0, 1, 2, 1, 2, 2, 1, 3, 4, 22, 0, 14}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("outcomes %v, want %v", statuses, want)
	}

	var two plainBatch
	two.add("message", g.ID, 1, uuid.NewString(), "one")
	two.add("message", g.ID, 2, uuid.NewString(), "two")
	if _, _, err := callBatch(t, pool, "chat_send_batch_plain_distinct", two, []int64{g.ID}); err == nil {
		t.Error("chat_send_batch_plain_distinct wrote two new messages of one conversation")
	}
}

// TestALonePlainSendRunsTheDistinctSendFunction: with
// chat_send_batch_plain made to fail, a lone plain send still commits (a
// batch of one runs chat_send_batch_plain_distinct), while a membership
// change, whose system entries store/system.go writes through the plain
// function, fails.
func TestALonePlainSendRunsTheDistinctSendFunction(t *testing.T) {
	t.Parallel()
	ctx, pool, st := storeOfItsOwn(t)
	g := mustGroup(t, st, 1, 2)
	failFunction(t, ctx, pool, "chat_send_batch_plain", "the plain send function ran")
	mustSend(t, st, g.ID, 1, "a lone send")
	if _, _, err := st.AddMember(ctx, g.ID, 1, 3, chat.RoleMember); err == nil {
		t.Error("a member's addition (its system entry) committed with chat_send_batch_plain failing")
	}
}

// sameAnswers calls first and then second with the same batch, each in a
// transaction of its own that is rolled back (callBatch), fails the test
// where their answers or what they write differ, and returns the answer's
// outcomes; the recalledNth's (from 1) must be answered as recalled.
func sameAnswers(t *testing.T, pool *pgxpool.Pool, first, second string, b plainBatch, convs []int64, recalledNth int) []int {
	t.Helper()
	firstAnswer, firstWritten, err := callBatch(t, pool, first, b, convs)
	if err != nil {
		t.Fatal(err)
	}
	secondAnswer, secondWritten, err := callBatch(t, pool, second, b, convs)
	if err != nil {
		t.Fatal(err)
	}
	if secondAnswer != firstAnswer {
		t.Errorf("answers differ:\n%s:\n%s\n%s:\n%s", first, firstAnswer, second, secondAnswer)
	}
	if secondWritten != firstWritten {
		t.Errorf("what they write differs:\n%s:\n%s\n%s:\n%s", first, firstWritten, second, secondWritten)
	}
	var statuses []int
	for _, line := range strings.Split(strings.TrimSpace(secondAnswer), "\n") {
		var a struct {
			Status     int     `json:"o_status"`
			RecalledAt *string `json:"o_recalled_at"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, a.Status)
		if len(statuses) == recalledNth && a.RecalledAt == nil {
			t.Error("the resend of a recalled message is not answered as recalled")
		}
	}
	return statuses
}

// storeOfItsOwn is a store on a database of its own, whose functions a
// test may replace (failFunction).
func storeOfItsOwn(t *testing.T) (context.Context, *pgxpool.Pool, *store.Store) {
	t.Helper()
	_, pool, st := storeAndURL(t)
	return testCtx(t), pool, st
}

// failFunction makes the send function fn (of chat_send_batch's
// arguments) raise message whenever it runs.
func failFunction(t *testing.T, ctx context.Context, pool *pgxpool.Pool, fn, message string) {
	t.Helper()
	mustExec(t, ctx, pool, `DO $do$ BEGIN
		EXECUTE regexp_replace(pg_get_functiondef('`+fn+sendBatchArgs+`'::regprocedure),
			'\$function\$.*\$function\$', '$function$ BEGIN RAISE EXCEPTION ''`+message+`''; END $function$');
	END $do$`)
}
