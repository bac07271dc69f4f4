package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

// changeParams: edits, recalls and reactions (RPC message.edit,
// message.recall, reaction.set).
type changeParams struct {
	ConversationID int64   `json:"conversationId"`
	Seq            int64   `json:"seq"`
	ClientMsgID    string  `json:"clientMsgId"`
	Body           *string `json:"body,omitempty"` // nil: left out
	Emoji          string  `json:"emoji,omitempty"`
	On             *bool   `json:"on,omitempty"`
}

// hasBody reports whether a recall's or reaction's parameters carry a
// body, which they do not take ("" is tolerated, as it always was).
func (p changeParams) hasBody() bool { return p.Body != nil && *p.Body != "" }

// ChangeReply acknowledges an edit, recall or reaction: seq is its entry's
// (0 for a reaction that changed nothing), targetSeq the message's.
type ChangeReply struct {
	ConversationID int64  `json:"conversationId"`
	Seq            int64  `json:"seq"`
	TargetSeq      int64  `json:"targetSeq"`
	ClientMsgID    string `json:"clientMsgId"`
	Duplicate      bool   `json:"duplicate,omitempty"`
	Unchanged      bool   `json:"unchanged,omitempty"`
	// Recalled: a resend of an edit whose message was recalled since
	// (recalledAt; no body: the recall erased it).
	Recalled   bool       `json:"recalled,omitempty"`
	Body       *string    `json:"body,omitempty"`
	EditedAt   *time.Time `json:"editedAt,omitempty"`
	RecalledAt *time.Time `json:"recalledAt,omitempty"`
	Emoji      string     `json:"emoji,omitempty"`
	On         *bool      `json:"on,omitempty"`
	Count      *int       `json:"count,omitempty"`
}

// bindTarget reads the conversation and message seq from the path.
func bindTarget(r *http.Request, p *changeParams) error {
	return pathConversationAnd(r, &p.ConversationID, "seq", &p.Seq)
}

// idempotencyKey is the optional Idempotency-Key header (a UUID), or a
// fresh one: a recall or reaction without it is still safe to repeat
// (recalling twice, setting a set reaction, change nothing).
func idempotencyKey(r *http.Request) (string, error) {
	if k, err := idempotencyHeader(r); k != "" || err != nil {
		return k, err
	}
	return uuid.NewString(), nil
}

// idempotencyHeader is the optional Idempotency-Key header in canonical
// form, "" when absent (or empty). A value that is no UUID is refused
// here, naming the header: the service's refusal would name clientMsgId,
// the RPC field, which an HTTP caller never sent. So is the header given
// on more than one line (idempotencyHeaderLines).
func idempotencyHeader(r *http.Request) (string, error) {
	k, err := idempotencyHeaderLines(r)
	if k == "" || err != nil {
		return "", err
	}
	return chat.ValidateUUID(idempotencyKeyHeader, k)
}

// idempotencyHeaderLines is the Idempotency-Key header's one value, ""
// when absent or empty; given on more than one line it is refused, as a
// value holding two keys is (no UUID): Header.Get reads the first line
// alone, and an empty or other first line would hide the key the client
// believes it sent (a repeat of its request would then do more than the
// first, or a request that refuses a key would run).
func idempotencyHeaderLines(r *http.Request) (string, error) {
	vs := r.Header.Values(idempotencyKeyHeader)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", chat.Errorf(chat.CodeInvalid, "%s is given on %d lines; send one key on one line", idempotencyKeyHeader, len(vs))
}

// idempotencyKeyHeader is the header's name, canonical as net/http keys
// r.Header.
const idempotencyKeyHeader = "Idempotency-Key"

// keyFromHeader reads the Idempotency-Key header of a send or an edit,
// whose key is the body's clientMsgId: the two name one key. Without a
// clientMsgId the header is the key; with both, they must be the same
// key, or the request is refused: a client that sends the header with a
// new clientMsgId on each retry believes its retries safe, and each would
// be a new message.
func keyFromHeader(r *http.Request, clientMsgID *string) error {
	h, err := idempotencyHeader(r)
	if err != nil || h == "" {
		return err
	}
	if *clientMsgID == "" {
		*clientMsgID = h
		return nil
	}
	k, err := chat.ValidateUUID("clientMsgId", *clientMsgID)
	if err != nil {
		return err
	}
	if k != h {
		return chat.Errorf(chat.CodeInvalid, "the %s header (%s) and clientMsgId (%s) differ: they are one key, send it in either or the same in both",
			idempotencyKeyHeader, h, k)
	}
	return nil
}

func bindEdit(a *API, w http.ResponseWriter, r *http.Request, p *changeParams) error {
	if err := bindTarget(r, p); err != nil {
		return err
	}
	var body struct {
		ClientMsgID string  `json:"clientMsgId"`
		Body        *string `json:"body"`
	}
	if err := a.bindBody(w, r, &body); err != nil {
		return err
	}
	p.ClientMsgID, p.Body = body.ClientMsgID, body.Body
	return keyFromHeader(r, &p.ClientMsgID)
}

func bindRecall(a *API, w http.ResponseWriter, r *http.Request, p *changeParams) error {
	if err := bindTarget(r, p); err != nil {
		return err
	}
	if err := a.bindNoBody(w, r); err != nil {
		return err
	}
	var err error
	p.ClientMsgID, err = idempotencyKey(r)
	return err
}

func bindReaction(on bool) func(*API, http.ResponseWriter, *http.Request, *changeParams) error {
	return func(a *API, w http.ResponseWriter, r *http.Request, p *changeParams) error {
		if err := bindTarget(r, p); err != nil {
			return err
		}
		if err := a.bindNoBody(w, r); err != nil {
			return err
		}
		// The mux unescapes path values: {emoji} is the emoji itself.
		p.Emoji, p.On = r.PathValue("emoji"), &on
		var err error
		p.ClientMsgID, err = idempotencyKey(r)
		return err
	}
}

func editMessage(a *API, ctx context.Context, user int64, p changeParams) (int, any, error) {
	if p.Emoji != "" || p.On != nil {
		return 0, nil, chat.Errorf(chat.CodeInvalid, "an edit takes clientMsgId, seq and body")
	}
	body, err := chat.EditBody(p.Body)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := a.sendContext(ctx)
	defer cancel()
	res, err := a.svc.Edit(ctx, chat.EditRequest{ConversationID: p.ConversationID, UserID: user, TargetSeq: p.Seq,
		ClientMsgID: p.ClientMsgID, Body: body})
	return changeReply(p, res, err)
}

func recallMessage(a *API, ctx context.Context, user int64, p changeParams) (int, any, error) {
	if p.hasBody() || p.Emoji != "" || p.On != nil {
		return 0, nil, chat.Errorf(chat.CodeInvalid, "a recall takes clientMsgId and seq")
	}
	ctx, cancel := a.sendContext(ctx)
	defer cancel()
	res, err := a.svc.Recall(ctx, chat.RecallRequest{ConversationID: p.ConversationID, UserID: user, TargetSeq: p.Seq,
		ClientMsgID: p.ClientMsgID})
	return changeReply(p, res, err)
}

func setReaction(a *API, ctx context.Context, user int64, p changeParams) (int, any, error) {
	if p.hasBody() || p.On == nil {
		return 0, nil, chat.Errorf(chat.CodeInvalid, `a reaction takes clientMsgId, seq, emoji and "on" (true sets, false removes)`)
	}
	ctx, cancel := a.sendContext(ctx)
	defer cancel()
	res, err := a.svc.React(ctx, chat.ReactionRequest{ConversationID: p.ConversationID, UserID: user, TargetSeq: p.Seq,
		ClientMsgID: p.ClientMsgID, Emoji: p.Emoji, On: *p.On})
	return changeReply(p, res, err)
}

func changeReply(p changeParams, res chat.ChangeResult, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	e := res.Entry
	reply := ChangeReply{ConversationID: p.ConversationID, Seq: e.Seq, TargetSeq: p.Seq, ClientMsgID: e.ClientMsgID,
		Duplicate: res.Duplicate, Unchanged: res.Unchanged}
	switch e.Kind {
	case chat.KindEdit:
		at := e.CreatedAt
		reply.EditedAt = &at
		if e.Recalled {
			reply.Recalled, reply.RecalledAt = true, e.RecalledAt
		} else {
			reply.Body = &e.Body
		}
	case chat.KindRecall:
		at := e.CreatedAt
		reply.RecalledAt = &at
	case chat.KindReaction:
		on, count := e.On, e.Count
		reply.Emoji, reply.On, reply.Count = e.Emoji, &on, &count
	}
	return http.StatusOK, reply, nil
}
