package httpapi

import (
	"context"
	"net/http"
	"time"

	chat "github.com/chatd/chatd"
)

// sendParams: POST /v1/conversations/{id}/messages and RPC send.
type sendParams struct {
	ConversationID int64 `json:"conversationId"`
	chat.SendPayload
}

// SendReply acknowledges a committed message. It carries no body (the
// sender has it, and echoing it would double the bytes of every send),
// except a forward's, which the sender did not send, and a resent
// message's edited since (with editedAt: its text is no longer the one
// resent); a message with attachments carries its type and what chatd
// knows of them. A resend of a message recalled since answers recalled and
// when, and no body.
type SendReply struct {
	ConversationID int64             `json:"conversationId"`
	Seq            int64             `json:"seq"`
	ClientMsgID    string            `json:"clientMsgId"`
	CreatedAt      time.Time         `json:"createdAt"`
	ReplyTo        *chat.ReplyRef    `json:"replyTo,omitempty"`
	ForwardedFrom  *chat.ForwardRef  `json:"forwardedFrom,omitempty"`
	Body           *string           `json:"body,omitempty"`
	MsgType        string            `json:"msgType,omitempty"`
	Attachments    []chat.Attachment `json:"attachments,omitempty"`
	EditedAt       *time.Time        `json:"editedAt,omitempty"`
	Recalled       bool              `json:"recalled,omitempty"`
	RecalledAt     *time.Time        `json:"recalledAt,omitempty"`
}

func bindSend(a *API, w http.ResponseWriter, r *http.Request, p *sendParams) error {
	if err := a.bindConversationBody(w, r, &p.ConversationID, &p.SendPayload); err != nil {
		return err
	}
	return keyFromHeader(r, &p.ClientMsgID)
}

// send commits a message through the same Service.Send as MQTT, so a
// clientMsgId is idempotent across transports: 201 when new, 200 with the
// original seq for a resend by the same sender, 409 for another sender's.
func send(a *API, ctx context.Context, user int64, p sendParams) (int, any, error) {
	ctx, cancel := a.sendContext(ctx)
	defer cancel()
	res, err := a.svc.Send(ctx, p.Request(p.ConversationID, user))
	if err != nil {
		return 0, nil, err
	}
	m := res.Message
	reply := SendReply{ConversationID: m.ConversationID, Seq: m.Seq, ClientMsgID: m.ClientMsgID, CreatedAt: m.CreatedAt,
		ReplyTo: m.ReplyTo, ForwardedFrom: m.ForwardedFrom, MsgType: m.MsgType, Attachments: m.Attachments,
		EditedAt: m.EditedAt, Recalled: m.Recalled, RecalledAt: m.RecalledAt}
	if (m.ForwardedFrom != nil || m.EditedAt != nil) && !m.Recalled {
		reply.Body = &m.Body
	}
	return createdReply(reply, !res.Duplicate, nil)
}

// historyParams: GET /v1/conversations/{id}/messages and RPC history.
type historyParams struct {
	ConversationID int64 `json:"conversationId"`
	BeforeSeq      int64 `json:"beforeSeq"`
	// AfterSeq is a pointer: given at all (even 0) means "page forward
	// from here"; absent means "the newest page".
	AfterSeq *int64 `json:"afterSeq"`
	Limit    int    `json:"limit"`
}

// HistoryReply is a page of messages, ascending by seq, with the lowest
// delivered and read watermarks of the other members: a message of the
// caller's with seq <= deliveredSeq reached everyone, seq <= readSeq was
// read by everyone.
type HistoryReply struct {
	Messages     []chat.Message `json:"messages"`
	DeliveredSeq int64          `json:"deliveredSeq"`
	ReadSeq      int64          `json:"readSeq"`
}

func bindHistory(_ *API, _ http.ResponseWriter, r *http.Request, p *historyParams) error {
	if err := pathConversation(r, &p.ConversationID); err != nil {
		return err
	}
	q := queryOf(r)
	var err error
	if p.BeforeSeq, err = q.int64("beforeSeq"); err != nil {
		return err
	}
	if q.values.Get("afterSeq") != "" {
		after, err := q.int64("afterSeq")
		if err != nil {
			return err
		}
		p.AfterSeq = &after
	}
	p.Limit, err = q.int("limit")
	return err
}

// history pages messages; limits are clamped by the Service (default 50,
// max 200).
func history(a *API, ctx context.Context, user int64, p historyParams) (int, any, error) {
	page, err := a.svc.HistoryPage(ctx, chat.HistoryQuery{
		ConversationID: p.ConversationID,
		UserID:         user,
		BeforeSeq:      p.BeforeSeq,
		AfterSeq:       derefOr(p.AfterSeq, 0),
		Forward:        p.AfterSeq != nil,
		Limit:          p.Limit,
	})
	if err != nil {
		return 0, nil, err
	}
	msgs := page.Messages
	if msgs == nil {
		msgs = []chat.Message{} // [] not null: clients iterate without a check
	}
	return http.StatusOK, HistoryReply{Messages: msgs, DeliveredSeq: page.DeliveredSeq, ReadSeq: page.ReadSeq}, nil
}

// seqParams: read receipts and "seen by" (RPC read and seen).
type seqParams struct {
	ConversationID int64 `json:"conversationId"`
	seqBody
}

// seqBody names a message by its seq in a request body.
type seqBody struct {
	Seq int64 `json:"seq"`
}

func bindRead(a *API, w http.ResponseWriter, r *http.Request, p *seqParams) error {
	return a.bindConversationBody(w, r, &p.ConversationID, &p.seqBody)
}

// markRead moves the caller's read watermark forward; a read that does not
// advance it is still 200 (advanced=false), because receipts race and
// repeat by nature.
func markRead(a *API, ctx context.Context, user int64, p seqParams) (int, any, error) {
	return okReply(a.svc.MarkRead(ctx, p.ConversationID, user, p.Seq))
}

func bindSeen(_ *API, _ http.ResponseWriter, r *http.Request, p *seqParams) error {
	return pathConversationAnd(r, &p.ConversationID, "seq", &p.Seq)
}

// seen answers "seen by N of M" (and "delivered to D of M") for one message.
func seen(a *API, ctx context.Context, user int64, p seqParams) (int, any, error) {
	return okReply(a.svc.SeenBy(ctx, p.ConversationID, user, p.Seq))
}

func derefOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}
