package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgerr"
)

// commitBatch commits a batch of sends (batcher.go gathers them; a lone
// send is a batch of one) in one transaction and one round trip whatever
// the batch size: BEGIN, the deferred relay wake-up and the deadline, a
// call of chat_send_batch (migrations/functions.sql holds every rule of a
// send) and COMMIT, pipelined. Each round trip wakes both PostgreSQL and
// this process; on an idle server that, not the SQL, is most of a lone
// send's latency. The relay is woken afterwards, off the senders' path.
//
// Each request gets its own outcome: a duplicate, a non-member or an unknown
// conversation fails (or answers) alone while the rest commit. Within a
// conversation seqs follow the batch's order, which is arrival order.
// It returns an error only for a failure of the whole transaction.
//
// PostgreSQL itself enforces deadline (statement_timeout on the call),
// and ctx should allow a little longer: the COMMIT travels in the same
// pipeline as the call, so a batch cancelled from this side could still
// commit after its callers were told "unavailable" (a cancel request
// races the lock it waits for). Reading PostgreSQL's own answer gives each
// caller the real outcome.
func (s *Store) commitBatch(ctx context.Context, deadline time.Time, reqs []*sendReq) error {
	args := newBatchArgs(reqs, s.uploadTypes)
	pool := s.pool
	if s.sendPool != nil {
		pool = s.sendPool
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return classify("send", fmt.Errorf("acquire connection: %w", err))
	}
	defer conn.Release()
	remaining := time.Until(deadline).Milliseconds()
	if remaining < 1 {
		return chat.Unavailable("send", context.DeadlineExceeded)
	}
	if err := s.sendBatchTx(ctx, conn.Conn(), remaining, reqs, args); err != nil {
		lost := answerLost(ctx, conn.Conn(), err)
		unknown := conn.Conn().PgConn().IsClosed() && pgerr.AnswerLost(err)
		endOpenTx(conn.Conn())
		switch {
		case lost:
			return lostAnswer{classify("send", err)}
		case unknown:
			return unknownOutcome{classify("send", err)}
		}
		return classify("send", err)
	}
	return nil
}

// unknownOutcome is a batch's failure on a connection that died without
// PostgreSQL's saying why, which commitAndAnswer does not run again (a
// reset, a write to a closed connection, its own deadline passed): it is
// taken for one that did not commit, but it may have, and then its
// entries were never published (Store.unpublished).
type unknownOutcome struct{ error }

func (e unknownOutcome) Unwrap() error { return e.error }

// lostAnswer is a batch's failure whose outcome is not known: the
// connection died once the pipeline, COMMIT and all, had gone out, so
// PostgreSQL may have committed it (commitAndAnswer asks by running the
// batch again). It reads as the failure it wraps.
type lostAnswer struct{ error }

func (e lostAnswer) Unwrap() error { return e.error }

// answerLost says whether err, a batch's failure on conn, may hide a
// commit: the connection died without PostgreSQL's saying why
// (pgerr.AnswerLost: an error of its own, such as the FATAL of a
// terminated backend, is its answer, and the batch did not commit),
// while ctx still ran (a batch cut off at its own deadline is answered
// unavailable, whatever became of it). A connection reset (or a write
// to a closed one) answers data that reached a socket its backend had
// closed already, one PostgreSQL terminated or restarted before the
// batch came: nothing of it ran, and the batch fails as unavailable.
func answerLost(ctx context.Context, conn *pgx.Conn, err error) bool {
	return ctx.Err() == nil && conn.PgConn().IsClosed() && pgerr.AnswerLost(err) &&
		!errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE)
}

// batchArgs are chat_send_batch's parallel arrays.
type batchArgs struct {
	kind, id, body, emoji []string
	conv, sender, target  []int64
	fwdConv, fwdSeq       []*int64
	on                    []bool
	// traceparent and tracestate are nil (SQL NULL) unless a change is
	// traced; then "" stands for an untraced one.
	traceparent, tracestate []string
	// att holds each message's attachments as JSON (a nil element: none;
	// nil, SQL NULL, when no change has any: a send without files encodes
	// no array for them); types the allowed types, nil when no change has
	// attachments.
	att   []*string
	types []string
	// plain: no change is an edit, recall or reaction, or replies or
	// forwards, so chat_send_batch_plain can take the batch; distinct: it
	// is plain and no conversation has two changes in it, so
	// chat_send_batch_plain_distinct can.
	plain, distinct bool
}

func newBatchArgs(reqs []*sendReq, types []string) batchArgs {
	n := len(reqs)
	a := batchArgs{kind: make([]string, n), id: make([]string, n), body: make([]string, n), emoji: make([]string, n),
		conv: make([]int64, n), sender: make([]int64, n), target: make([]int64, n),
		fwdConv: make([]*int64, n), fwdSeq: make([]*int64, n), on: make([]bool, n), plain: true, distinct: true}
	for i, r := range reqs {
		c := r.req
		a.plain = a.plain && plainChange(c)
		a.distinct = a.distinct && !slices.Contains(a.conv[:i], c.ConversationID)
		a.kind[i], a.conv[i], a.sender[i], a.id[i], a.body[i] = string(c.Kind), c.ConversationID, c.UserID, c.ClientMsgID, c.Body
		a.emoji[i], a.on[i] = c.Emoji, c.On
		a.target[i] = c.TargetSeq
		if c.Kind == chat.KindMessage {
			a.target[i] = c.ReplyTo
		}
		if f := c.Forward; f != nil {
			a.fwdConv[i], a.fwdSeq[i] = &f.ConversationID, &f.Seq
		}
		if len(c.Attachments) > 0 {
			// Validated: ids are base32, captions valid UTF-8.
			b, _ := json.Marshal(c.Attachments)
			j := string(b)
			if a.att == nil {
				a.att = make([]*string, n)
			}
			a.att[i] = &j
			a.types = types
			if a.types == nil {
				a.types = chat.DefaultUploadTypes
			}
		}
		if r.trace.Parent != "" {
			if a.traceparent == nil {
				a.traceparent, a.tracestate = make([]string, n), make([]string, n)
			}
			a.traceparent[i], a.tracestate[i] = r.trace.Parent, r.trace.State
		}
	}
	a.distinct = a.distinct && a.plain
	return a
}

// plainChange says whether c is one chat_send_batch_plain takes: a
// message that neither replies nor forwards, or a system entry.
func plainChange(c chat.Change) bool {
	return (c.Kind == chat.KindMessage && c.ReplyTo == 0 && c.Forward == nil) || c.Kind == chat.KindSystem
}

// window is a change window as chat_send_batch takes it: NULL for none.
func window(d time.Duration) *time.Duration {
	if d < 0 {
		return nil
	}
	return &d
}

// Outcomes chat_send_batch reports per change (migrations/functions.sql).
const (
	outNew = iota
	outDuplicate
	outConflict
	outNotMember
	outNoConversation
	outUnchanged
	outAlreadyRecalled
	outNoTarget
	outTargetRecalled
	outNotAllowed
	outBadReply
	outForwardNotMember
	outForwardMissing
	outReactionLimit
	outUploadUnknown
	outUploadNotYours
	outUploadOtherConversation
	outUploadAttached
	outUploadIncomplete
	outUploadSize
	outUploadType
	_ // 21 was a forward of a message with attachments: forwards copy them now
)

// outBlocked is appended after the attachments' outcomes (14..21):
// outcome codes are never renumbered.
const outBlocked = 22

// outForwardEdit: an edit of a forward, which is a copy of its source.
const outForwardEdit = 23

// outEmptyEdit: an edit to an empty body of a message without
// attachments, which would leave a message of nothing.
const outEmptyEdit = 24

// outReactionKinds: a new emoji on a message that carries
// chat.MaxReactionKinds distinct emoji already.
const outReactionKinds = 25

// outcome is one row of chat_send_batch's answer.
type outcome struct {
	status         int16
	seq, sender    *int64
	body           *string
	at             *time.Time
	targetSender   *int64
	snippet        *string
	targetRecalled *bool
	count          *int32
	msgType        *string
	attachments    []byte
	recalledAt     *time.Time
	editedAt       *time.Time
	targetMsgType  *string
}

const sendBatchSQL = `SELECT o_status, o_seq, o_sender, o_body, o_at, o_target_sender, o_snippet, o_target_recalled, o_count,
	       o_msg_type, o_attachments, o_recalled_at, o_edited_at, o_target_msg_type
	FROM chat_send_batch($1::text[], $2::bigint[], $3::bigint[], $4::uuid[], $5::text[], $6::bigint[],
	                     $7::bigint[], $8::bigint[], $9::text[], $10::boolean[], $11::interval, $12::interval,
	                     $13::text[], $14::text[], $15::jsonb[], $16::text[])`

// sendPlainBatchSQL is sendBatchSQL for a plain batch (batchArgs.plain):
// chat_send_batch_plain takes the same arguments and answers the same rows
// without the executor start-up of the lifecycle's expressions
// (functions.sql makes it from chat_send_batch's text).
var sendPlainBatchSQL = strings.Replace(sendBatchSQL, "FROM chat_send_batch(", "FROM chat_send_batch_plain(", 1)

// sendDistinctBatchSQL is sendBatchSQL for a plain batch with at most one
// change in each conversation (batchArgs.distinct), a lone send among
// them: chat_send_batch_plain_distinct answers the same rows without the
// executor start-up of the deciding statement's windows and groupings,
// which only a conversation with several changes needs (functions.sql
// makes it from chat_send_batch_plain's text).
var sendDistinctBatchSQL = strings.Replace(sendBatchSQL, "FROM chat_send_batch(", "FROM chat_send_batch_plain_distinct(", 1)

// batchSQL is the statement that commits a batch of args.
func (a batchArgs) batchSQL() string {
	if a.distinct {
		return sendDistinctBatchSQL
	}
	if a.plain {
		return sendPlainBatchSQL
	}
	return sendBatchSQL
}

// SendMessagesSQL calls chat_send_batch for messages alone (no replies or
// forwards) from four parallel arrays ($1 conversations, $2 senders, $3
// clientMsgIds, $4 bodies): what benchmarks and tests run against the
// function directly.
const SendMessagesSQL = `SELECT o_status, o_seq, o_sender, o_body, o_at FROM chat_send_batch(
	array_fill('message'::text, ARRAY[cardinality($1::bigint[])]), $1::bigint[], $2::bigint[], $3::uuid[], $4::text[],
	array_fill(0::bigint, ARRAY[cardinality($1::bigint[])]), array_fill(NULL::bigint, ARRAY[cardinality($1::bigint[])]),
	array_fill(NULL::bigint, ARRAY[cardinality($1::bigint[])]), array_fill(NULL::text, ARRAY[cardinality($1::bigint[])]),
	array_fill(false, ARRAY[cardinality($1::bigint[])]), NULL, NULL)`

// sendBatchTx runs the batch's transaction as one pipeline and fills in each
// request's outcome.
func (s *Store) sendBatchTx(ctx context.Context, conn *pgx.Conn, timeoutMillis int64, reqs []*sendReq, a batchArgs) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	// The relay is woken after COMMIT (relayWaker); the call must end by
	// the batch's deadline.
	b.Queue(`SELECT set_config('chat.defer_notify', 'on', true), set_config('statement_timeout', $1, true)`,
		strconv.FormatInt(timeoutMillis, 10))
	b.Queue(a.batchSQL(), texts(a.kind), int8s(a.conv), int8s(a.sender), uuids(a.id), texts(a.body), int8s(a.target), a.fwdConv, a.fwdSeq,
		texts(a.emoji), a.on,
		window(s.limits.EditWindow), window(s.limits.RecallWindow), a.traceparent, a.tracestate, a.att, a.types)
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("write %d changes: %w", len(reqs), err)
	}
	i := 0
	for rows.Next() {
		var o outcome
		if err := rows.Scan(&o.status, &o.seq, &o.sender, &o.body, &o.at, &o.targetSender, &o.snippet, &o.targetRecalled, &o.count,
			&o.msgType, &o.attachments, &o.recalledAt, &o.editedAt, &o.targetMsgType); err != nil {
			rows.Close()
			return fmt.Errorf("write %d changes: %w", len(reqs), err)
		}
		if i >= len(reqs) {
			rows.Close()
			return fmt.Errorf("write %d changes: more outcomes than changes", len(reqs))
		}
		r := reqs[i]
		i++
		if r.res, r.err, err = s.settleOutcome(r.req, o); err != nil {
			rows.Close()
			return fmt.Errorf("write %d changes: change %d: %w", len(reqs), i, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("write %d changes: %w", len(reqs), err)
	}
	if i != len(reqs) {
		return fmt.Errorf("write %d changes: %d outcomes", len(reqs), i)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit %d changes: %w", len(reqs), err)
	}
	if tag.String() != "COMMIT" {
		// COMMIT of a transaction that failed answers ROLLBACK.
		return fmt.Errorf("commit %d changes: transaction rolled back", len(reqs))
	}
	return nil
}

// settleOutcome turns one row of chat_send_batch's answer into the
// change's result, or the typed error a client gets; err is for an answer
// that cannot be (a bug).
func (s *Store) settleOutcome(c chat.Change, o outcome) (res chat.ChangeResult, refused error, err error) {
	what := map[chat.EntryKind]string{chat.KindEdit: "edited", chat.KindRecall: "recalled", chat.KindReaction: "reacted to"}[c.Kind]
	switch o.status {
	case outNoConversation:
		return res, errNoConversation(c.ConversationID), nil
	case outNotMember:
		return res, errNotMember(c.ConversationID), nil
	case outConflict:
		return res, chat.Errorf(chat.CodeConflict, "clientMsgId %s is already used in this conversation by another sender or for another change", c.ClientMsgID), nil
	case outNoTarget:
		return res, chat.Errorf(chat.CodeNotFound, "there is no message %d in conversation %d to be %s", c.TargetSeq, c.ConversationID, what), nil
	case outTargetRecalled:
		return res, chat.Errorf(chat.CodeGone, "message %d was recalled", c.TargetSeq), nil
	case outNotAllowed:
		if c.Kind == chat.KindEdit {
			return res, chat.Errorf(chat.CodeForbidden, "only the sender can edit a message, within %s of sending it", windowText(s.limits.EditWindow)), nil
		}
		return res, chat.Errorf(chat.CodeForbidden, "only the sender (within %s of sending) or a group's owner or admin can recall a message", windowText(s.limits.RecallWindow)), nil
	case outBadReply:
		return res, chat.Errorf(chat.CodeInvalid, "replyTo %d is not a message of conversation %d", c.ReplyTo, c.ConversationID), nil
	case outForwardNotMember:
		return res, chat.Errorf(chat.CodeForbidden, "not a member of conversation %d, the forwarded message's", c.Forward.ConversationID), nil
	case outForwardMissing:
		return res, chat.Errorf(chat.CodeNotFound, "there is no message %d in conversation %d to forward (or it was recalled)", c.Forward.Seq, c.Forward.ConversationID), nil
	case outReactionLimit:
		return res, chat.Errorf(chat.CodeConflict, "at most %d different reactions per user on one message", chat.MaxReactionsPerUser), nil
	case outReactionKinds:
		return res, chat.Errorf(chat.CodeTooManyReactions, "message %d carries %d different reactions already: add to one of them, or wait until one is taken off", c.TargetSeq, chat.MaxReactionKinds), nil
	case outForwardEdit:
		return res, chat.Errorf(chat.CodeForbidden, "message %d is a forward: it shows another message's words and cannot be edited", c.TargetSeq), nil
	case outEmptyEdit:
		return res, chat.Errorf(chat.CodeInvalid, "body is empty: only a message with attachments may be edited to no text"), nil
	case outBlocked:
		return res, chat.Errorf(chat.CodeBlocked, "the other member of conversation %d does not accept your messages", c.ConversationID), nil
	case outUploadUnknown, outUploadNotYours, outUploadOtherConversation, outUploadAttached, outUploadIncomplete,
		outUploadSize, outUploadType:
		return res, uploadRefusal(o.status, c, derefStr(o.snippet)), nil
	}
	if o.at == nil || (o.status != outUnchanged && o.seq == nil) {
		return res, nil, fmt.Errorf("outcome %d is incomplete", o.status)
	}
	e := chat.Message{ConversationID: c.ConversationID, Kind: c.Kind, SenderID: c.UserID, ClientMsgID: c.ClientMsgID,
		Body: c.Body, CreatedAt: *o.at, TargetSeq: c.TargetSeq, Emoji: c.Emoji, On: c.On}
	if o.seq != nil {
		e.Seq = *o.seq
	}
	if o.count != nil {
		e.Count = int(*o.count)
	}
	switch o.status {
	case outNew:
		if c.Kind == chat.KindMessage {
			if err := fillMessage(&e, c, o); err != nil {
				return res, nil, err
			}
		}
		if c.Kind == chat.KindRecall {
			e.Body = ""
		}
	case outDuplicate:
		res.Duplicate = true
		if o.sender == nil || o.body == nil {
			return res, nil, fmt.Errorf("duplicate outcome is incomplete")
		}
		e.SenderID, e.Body = *o.sender, *o.body
		if c.Kind == chat.KindMessage {
			// What it replies to or forwards, as its first answer said
			// (chat_send_batch holds a resend to the same references).
			if err := fillMessage(&e, c, o); err != nil {
				return res, nil, err
			}
		}
		if o.recalledAt != nil {
			// The message (or the edited one) was recalled since: the
			// answer says so, as history would, rather than showing an
			// empty text.
			at := o.recalledAt.UTC()
			e = e.AsRecalled(&at)
		} else if o.editedAt != nil && c.Kind == chat.KindMessage {
			// Edited since: the body is the current one, and says so,
			// as history would.
			at := o.editedAt.UTC()
			e.EditedAt = &at
		}
	case outUnchanged:
		res.Unchanged = true
	case outAlreadyRecalled:
		// The answer is the first recall, whoever asks again: its seq and
		// time come with it, so its clientMsgId and sender must too.
		res.Unchanged = true
		if o.sender == nil || o.body == nil {
			return res, nil, fmt.Errorf("already-recalled outcome is incomplete")
		}
		e.SenderID, e.ClientMsgID = *o.sender, *o.body
	default:
		return res, nil, fmt.Errorf("unknown outcome %d", o.status)
	}
	res.Entry = e
	return res, nil, nil
}

// fillMessage completes a message's entry, the new one's or a resend's
// answer: no target, what it replies to or forwards, its type and
// attachments.
func fillMessage(e *chat.Message, c chat.Change, o outcome) error {
	e.TargetSeq = 0
	fillReferences(e, c, o)
	return fillAttachments(e, o)
}

// fillReferences adds what a new message replies to or forwards.
func fillReferences(e *chat.Message, c chat.Change, o outcome) {
	if c.Forward != nil && o.body != nil {
		e.Body = *o.body
		e.ForwardedFrom = &chat.ForwardRef{ConversationID: c.Forward.ConversationID, Seq: c.Forward.Seq, SenderID: deref(o.targetSender)}
		return
	}
	if c.ReplyTo > 0 {
		e.ReplyTo = replyRef(c.ReplyTo, o.targetSender, o.snippet, o.targetMsgType, o.targetRecalled)
	}
}

// fillAttachments adds a message's type and attachments, as
// chat_attachments read them in the batch's transaction.
func fillAttachments(e *chat.Message, o outcome) error {
	if o.msgType != nil {
		e.MsgType = *o.msgType
	}
	if len(o.attachments) == 0 {
		return nil
	}
	if err := json.Unmarshal(o.attachments, &e.Attachments); err != nil {
		return fmt.Errorf("decode attachments: %w", err)
	}
	return nil
}

// uploadRefusal is the error of an attachment chat_send_batch refused
// (id is the upload's).
func uploadRefusal(status int16, c chat.Change, id string) error {
	switch status {
	case outUploadUnknown:
		return chat.Errorf(chat.CodeNotFound, "there is no upload %s (it may have expired: uploads not sent within the upload TTL are deleted)", id)
	case outUploadNotYours:
		return chat.Errorf(chat.CodeForbidden, "upload %s is another user's; attach your own uploads", id)
	case outUploadOtherConversation:
		return chat.Errorf(chat.CodeInvalid, "upload %s was made for another conversation than %d, or as an avatar; upload the file for this one", id, c.ConversationID)
	case outUploadAttached:
		return chat.Errorf(chat.CodeConflict, "upload %s is attached to a message already; an upload is sent once", id)
	case outUploadIncomplete:
		return chat.Errorf(chat.CodeInvalid, "upload %s is not complete: PUT its bytes (and, with an object store, POST its completeUrl) first", id)
	case outUploadSize:
		return chat.Errorf(chat.CodeInvalid, "upload %s is not of its declared size", id)
	}
	return chat.Errorf(chat.CodeUnsupported, "upload %s is of a type not accepted here", id) // outUploadType
}

func derefStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func windowText(d time.Duration) string {
	if d < 0 {
		return "any time"
	}
	return d.String()
}
