package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"
)

// sendOp is one message being sent until acknowledged; Send calls for the
// same clientMsgId share it.
type sendOp struct {
	p    PendingSend
	done chan struct{} // closed with out/err set
	out  Outcome
	err  error
	// waiting counts the Commit calls waiting for the outcome and
	// settled says it is known (both guarded by Client.mu): a refusal
	// for good that no caller got (the send was recovered from
	// SessionDir, or its callers' contexts ended) is told on Events.
	waiting int
	settled bool
}

// Send sends body to a conversation and returns its seq once chatd has
// committed it (QoS 1 PUBACK). It picks a new clientMsgId (UUID v4), so a
// Send is one message; use SendWithID to own the id.
//
// The message is recorded in the session (SessionDir) before it is
// published and re-published with the same clientMsgId until acknowledged:
// across reconnects, while chatd answers "unavailable", and by the next
// client after a restart. chatd stores it once whatever the number of
// attempts. Send returns:
//   - the seq when committed (also for a resend chatd recognised, even
//     when the message was recalled since: Commit tells that);
//   - an *Error matching ErrNotMember, ErrInvalid or ErrRateLimited when
//     chatd refused it for good (the message is dropped from the session);
//     a rate limit answered to a re-publish after a publish without a
//     PUBACK (or without its seq) is not for good, since that publish may
//     have committed: the message is re-published later;
//   - an error matching ErrQueued and ctx.Err() when ctx ended first: the
//     message is still being sent in the background (a refusal for good
//     then comes as an error event on Events, with its ClientMsgID);
//   - ErrClosed when the client was closed first, or an *Error matching
//     ErrUnauthorized when chatd refused the client's static Token,
//     ErrClientIDRejected when it refused its ClientID, or ErrTakenOver
//     when other clients took its ClientID (see Client.Err);
//     the message stays queued in SessionDir for the next client opened
//     on it.
func (c *Client) Send(ctx context.Context, conversationID int64, body string) (int64, error) {
	return c.SendWithID(ctx, conversationID, uuid.NewString(), body)
}

// SendWithID is Send with a caller-chosen clientMsgId, a UUID the caller
// reuses on every retry of the same message (for example across its own
// restarts). A Send already running for the id is joined, not repeated.
// Either letter case is the same id; events (and chatd) carry it lower
// case.
func (c *Client) SendWithID(ctx context.Context, conversationID int64, clientMsgID, body string) (int64, error) {
	return c.Apply(ctx, Change{ConversationID: conversationID, ClientMsgID: clientMsgID, Body: body})
}

// SendOptions are a message's optional parts.
type SendOptions struct {
	// ReplyTo is the seq of a message of the same conversation this one
	// replies to.
	ReplyTo int64
	// Forward is a message (of a conversation you are in) whose body this
	// one copies; leave the body empty.
	Forward *MessageRef
	// ClientMsgID, when set, is the message's id (reuse it on retries);
	// else a new one is picked.
	ClientMsgID string
	// Attachments are uploads (Upload) the message carries, 1 to 10; the
	// body may then be empty.
	Attachments []AttachmentRef
}

// SendMessage is Send with a reply, a forward or attachments.
func (c *Client) SendMessage(ctx context.Context, conversationID int64, body string, o SendOptions) (int64, error) {
	return c.Apply(ctx, Change{ConversationID: conversationID, ClientMsgID: o.ClientMsgID, Body: body, ReplyTo: o.ReplyTo,
		Forward: o.Forward, Attachments: o.Attachments})
}

// Edit replaces the body of your message seq and returns the edit's own
// seq (an entry of the conversation's stream: message.edited).
func (c *Client) Edit(ctx context.Context, conversationID, seq int64, body string) (int64, error) {
	return c.Apply(ctx, Change{Kind: KindEdit, ConversationID: conversationID, TargetSeq: seq, Body: body})
}

// Recall takes message seq back for everyone and returns the recall's
// seq (that of the first recall, if it was recalled already).
func (c *Client) Recall(ctx context.Context, conversationID, seq int64) (int64, error) {
	return c.Apply(ctx, Change{Kind: KindRecall, ConversationID: conversationID, TargetSeq: seq})
}

// React sets (on) or removes your emoji on message seq and returns the
// reaction's seq, or 0 when it changed nothing (it was set, or absent).
func (c *Client) React(ctx context.Context, conversationID, seq int64, emoji string, on bool) (int64, error) {
	return c.Apply(ctx, Change{Kind: KindReaction, ConversationID: conversationID, TargetSeq: seq, Emoji: emoji, On: on})
}

// Change is one write to a conversation: a message (Kind "" or
// KindMessage, with ReplyTo or Forward), or an edit, recall or reaction
// of message TargetSeq.
type Change struct {
	Kind           string
	ConversationID int64
	ClientMsgID    string // a UUID, reused on every retry; "" picks a new one
	Body           string
	TargetSeq      int64
	ReplyTo        int64
	Forward        *MessageRef
	Emoji          string
	On             bool
	Attachments    []AttachmentRef
}

// Apply commits a change as Send commits a message: recorded in the
// session, re-published with the same clientMsgId until chatd settles it,
// joined when one runs for the id already. It returns the entry's seq (0
// for a reaction that changed nothing).
func (c *Client) Apply(ctx context.Context, ch Change) (int64, error) {
	out, err := c.Commit(ctx, ch)
	return out.Seq, err
}

// Outcome is how chatd settled a change (Commit).
type Outcome struct {
	// Seq is the entry's seq: the message's, or the edit's, recall's or
	// reaction's own (0 for a reaction that changed nothing).
	Seq int64
	// Recalled says the message (the one sent, or the one a change is
	// of) has been recalled since the change committed: chatd answered a
	// re-publish of it, whose first PUBACK was lost, as a duplicate of a
	// recalled message. It is gone for everyone (its body and attachments
	// erased, an edit's too), so do not show it as sent. Always false
	// for a Recall.
	Recalled bool
}

// Commit is Apply returning all chatd said of the change, not only its
// seq: whether the message was recalled since (Outcome.Recalled). Errors
// are Send's.
func (c *Client) Commit(ctx context.Context, ch Change) (Outcome, error) {
	name := opName(ch.Kind)
	if ch.ClientMsgID == "" {
		ch.ClientMsgID = uuid.NewString()
	}
	if ch.ConversationID <= 0 {
		return Outcome{}, &Error{Op: name, Code: "invalid", Message: "conversation id must be positive"}
	}
	// chatd takes a UUID in its 36-character form, either letter case,
	// and answers and stores it lower case: kept so here too, the id
	// finds the message in history, joins a send running for it in the
	// other case, and names it as chatd's events do.
	u, err := uuid.Parse(ch.ClientMsgID)
	if err != nil || len(ch.ClientMsgID) != 36 {
		return Outcome{}, &Error{Op: name, Code: "invalid", Message: fmt.Sprintf("clientMsgId %q is not a UUID like 123e4567-e89b-12d3-a456-426614174000", ch.ClientMsgID)}
	}
	ch.ClientMsgID = u.String()
	if !utf8.ValidString(ch.Body) || !utf8.ValidString(ch.Emoji) {
		// JSON encoding would silently replace the bad bytes.
		return Outcome{}, &Error{Op: name, Code: "invalid", Message: "body is not valid UTF-8"}
	}
	if ch.Kind != "" && ch.Kind != KindMessage && ch.TargetSeq <= 0 {
		return Outcome{}, &Error{Op: name, Code: "invalid", Message: "the message's seq must be positive"}
	}
	clientMsgID := ch.ClientMsgID
	c.mu.Lock()
	op, running := c.sends[clientMsgID]
	closed := c.closed
	if running && !closed {
		op.waiting++
	}
	c.mu.Unlock()
	if closed {
		return Outcome{}, ErrClosed
	}
	if !running {
		p := PendingSend{ClientMsgID: clientMsgID, ConversationID: ch.ConversationID, Body: ch.Body, QueuedAt: time.Now().UTC(),
			Kind: ch.Kind, TargetSeq: ch.TargetSeq, ReplyTo: ch.ReplyTo, Forward: ch.Forward, Emoji: ch.Emoji, On: ch.On,
			Attachments: ch.Attachments}
		if _, err := c.journal.add(p); errors.Is(err, errTooLargeForJournal) {
			return Outcome{}, &Error{Op: name, Code: "too_large", Reason: 0x95, Message: err.Error()}
		} else if err != nil {
			return Outcome{}, err
		}
		op = c.startSend(p, true)
		if op == nil {
			return Outcome{}, ErrClosed
		}
	}
	select {
	case <-op.done:
		return op.out, op.err
	case <-ctx.Done():
		c.mu.Lock()
		settled := op.settled
		if !settled {
			op.waiting--
		}
		c.mu.Unlock()
		if settled {
			// Counted as told: return it.
			<-op.done
			return op.out, op.err
		}
		return Outcome{}, fmt.Errorf("%s %s: %w: %w", name, clientMsgID, ErrQueued, ctx.Err())
	}
}

func opName(kind string) string {
	switch kind {
	case KindEdit:
		return "edit"
	case KindRecall:
		return "recall"
	case KindReaction:
		return "react"
	}
	return "send"
}

// publication is the topic and payload of a pending change.
func (p PendingSend) publication() (string, []byte, error) {
	conv := "chat/v1/conv/" + strconv.FormatInt(p.ConversationID, 10) + "/"
	var v any
	topic := conv + "msg"
	switch p.Kind {
	case KindEdit:
		topic, v = conv+"edit", struct {
			ClientMsgID string `json:"clientMsgId"`
			Seq         int64  `json:"seq"`
			Body        string `json:"body"`
		}{p.ClientMsgID, p.TargetSeq, p.Body}
	case KindRecall:
		topic, v = conv+"recall", struct {
			ClientMsgID string `json:"clientMsgId"`
			Seq         int64  `json:"seq"`
		}{p.ClientMsgID, p.TargetSeq}
	case KindReaction:
		topic, v = conv+"react", struct {
			ClientMsgID string `json:"clientMsgId"`
			Seq         int64  `json:"seq"`
			Emoji       string `json:"emoji"`
			On          bool   `json:"on"`
		}{p.ClientMsgID, p.TargetSeq, p.Emoji, p.On}
	default:
		v = struct {
			ClientMsgID string          `json:"clientMsgId"`
			Body        string          `json:"body,omitempty"`
			ReplyTo     int64           `json:"replyTo,omitempty"`
			Forward     *MessageRef     `json:"forward,omitempty"`
			Attachments []AttachmentRef `json:"attachments,omitempty"`
		}{p.ClientMsgID, p.Body, p.ReplyTo, p.Forward, p.Attachments}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", opName(p.Kind), err)
	}
	return topic, b, nil
}

// startSend runs the send loop of p unless one runs already; nil once
// closed. waiter: a Commit call waits for the outcome. The loop starts once the conversation's previous send settled:
// sends queued while offline would otherwise all wake when the connection
// returns and be stored in any order. One round trip per message of a
// backlog is the price of storing them as they were typed.
func (c *Client) startSend(p PendingSend, waiter bool) *sendOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if op, ok := c.sends[p.ClientMsgID]; ok {
		if waiter {
			op.waiting++
		}
		return op
	}
	op := &sendOp{p: p, done: make(chan struct{})}
	if waiter {
		op.waiting = 1
	}
	c.sends[p.ClientMsgID] = op
	prev := c.tails[p.ConversationID]
	c.tails[p.ConversationID] = op
	c.workers.Add(1)
	go func() {
		defer c.workers.Done()
		if prev != nil {
			select {
			case <-prev.done:
			case <-c.life.Done():
			}
		}
		op.out, op.err = c.sendUntilDone(p)
		if !unsent(op.err) {
			if err := c.journal.remove(p.ClientMsgID); err != nil {
				c.cfg.Logger.Warn("update send journal", "err", err)
			}
		}
		c.mu.Lock()
		delete(c.sends, p.ClientMsgID)
		if c.tails[p.ConversationID] == op {
			delete(c.tails, p.ConversationID)
		}
		op.settled = true
		told := op.waiting > 0
		c.mu.Unlock()
		close(op.done)
		if told && op.err == nil && op.out.Seq > 0 {
			// A caller has the seq (Commit returns it now): a receipt
			// naming it need not wait for its entry (waitsForEntries).
			c.disp.noteSent(p.ConversationID, op.out.Seq)
		}
		if op.err != nil && !unsent(op.err) {
			c.cfg.Logger.Info("send refused", "conversation", p.ConversationID, "clientMsgId", p.ClientMsgID, "err", op.err)
			if !told {
				c.disp.push(queued{event: refusalEvent(p, op.err)})
			}
		}
	}()
	return op
}

// refusalEvent tells the application of a change chatd refused for good
// that no caller got the refusal of, as chatd's own error events for a
// publish do: the conversation, the clientMsgId and the refusal's code.
func refusalEvent(p PendingSend, err error) *Event {
	ev := &Event{Type: EventError, ConversationID: p.ConversationID, ClientMsgID: p.ClientMsgID, Code: "internal", Message: err.Error()}
	var e *Error
	if errors.As(err, &e) {
		ev.Code = e.Code
	}
	return ev
}

// unsent reports whether a send ended without chatd settling it: the
// client closed, chatd refused the static token or the client id, or
// another client took its client id, so that no connection will come.
// The change stays in the journal for the next client.
func unsent(err error) bool {
	return errors.Is(err, ErrClosed) || stoppedBy(err)
}

// stoppedBy reports whether err is why the client stopped connecting
// (Client.Err): a refused static token, its client id refused, or its
// client id taken. Every error Client.Err can be belongs here: one left
// out is taken for Close by sends, and for chatd briefly unreachable by
// requests.
func stoppedBy(err error) bool {
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrClientIDRejected) || errors.Is(err, ErrTakenOver)
}

// sendUntilDone publishes p until a PUBACK settles it: success, or a
// refusal other than "unavailable". It returns ErrClosed when the client
// closes first.
//
// A success PUBACK without the seq property (a server that strips user
// properties, e.g. because Request Problem Information was 0) still means
// committed: the seq is then resolved by re-publishing the same clientMsgId
// (chatd answers a duplicate with the original seq) and, if that does not
// carry it either, by looking the message up in history. The message stays
// in the journal until its seq is known.
func (c *Client) sendUntilDone(p PendingSend) (Outcome, error) {
	topic, payload, err := p.publication()
	if err != nil {
		return Outcome{}, err
	}
	op := opName(p.Kind)
	pause := newRetryPause(10 * time.Second)
	noSeq := 0 // success PUBACKs without a seq so far
	// unsure: an earlier publish may have committed p (no PUBACK came,
	// or one without the seq). chatd then refuses a re-publish with 0x97
	// while the sender's bucket is empty, committed or not: that is no
	// verdict on p (docs/protocol.md "Rate limits": resend it later).
	unsure := false
	for attempt := 0; ; attempt++ {
		cs, err := c.ready(c.life)
		if stoppedBy(err) {
			return Outcome{}, fmt.Errorf("%s: %w", op, err)
		}
		if err != nil {
			return Outcome{}, ErrClosed
		}
		if attempt > 0 {
			c.stats.resends.Add(1)
		}
		// One attempt lasts until the PUBACK, the ack timeout, or the
		// connection going down, whichever is first.
		pb := &paho.Publish{QoS: 1, Topic: topic, Payload: payload}
		if err := cs.tooLarge(op, pb); err != nil {
			return Outcome{}, err
		}
		actx, cancel := context.WithTimeout(cs.ctx, c.cfg.AckTimeout)
		resp, err := cs.cm.Publish(actx, pb)
		cancel()
		if resp != nil {
			if h := c.ackHook.Load(); h != nil {
				resp = (*h)(resp)
			}
			if resp.ReasonCode < 0x80 {
				if seq, ok := ackSeq(resp); ok {
					return Outcome{Seq: seq, Recalled: p.Kind != KindRecall && resp.Properties.User.Get("recalled") == "true"}, nil
				}
				if resp.Properties != nil && resp.Properties.User.Get("unchanged") == "true" {
					return Outcome{}, nil // a reaction that was already as asked
				}
				// Committed, but the seq is unknown: not a failure, and
				// the message stays in the journal until it is resolved.
				noSeq++
				unsure = true
				c.cfg.Logger.Warn("send: PUBACK without seq; resolving it", "clientMsgId", p.ClientMsgID, "attempt", noSeq)
				if noSeq == 1 {
					// Re-publish at once: chatd answers the duplicate
					// with the original seq.
					continue
				}
				// The duplicate's PUBACK had no seq either: ask history.
				out, err := c.findSent(p)
				if err == nil && out.Seq > 0 {
					return out, nil
				}
				if errors.Is(err, ErrClosed) {
					return Outcome{}, ErrClosed
				}
				c.cfg.Logger.Warn("send: seq of a committed message not found in history yet", "clientMsgId", p.ClientMsgID, "err", err)
				if !pause.wait(c.life, err) {
					return Outcome{}, ErrClosed
				}
				continue
			}
			perr := publishError(op, resp)
			if !retryable(perr) && !(unsure && errors.Is(perr, ErrRateLimited)) {
				return Outcome{}, perr
			}
			c.cfg.Logger.Debug("send: chatd unavailable or a re-publish rate limited; retrying", "clientMsgId", p.ClientMsgID, "err", perr)
			if !pause.wait(c.life, perr) {
				return Outcome{}, ErrClosed
			}
			continue
		}
		if c.life.Err() != nil {
			return Outcome{}, ErrClosed
		}
		// No PUBACK: the connection dropped or the ack timed out. The next
		// attempt re-publishes the same clientMsgId.
		unsure = true
		c.cfg.Logger.Debug("send: no PUBACK; will re-publish", "clientMsgId", p.ClientMsgID, "err", err)
		if cs.ctx.Err() == nil && !sleepCtx(c.life, 100*time.Millisecond) {
			return Outcome{}, ErrClosed
		}
	}
}

// ackSeq reads the "seq" user property of chatd's PUBACK; false when it is
// missing or not a positive number.
func ackSeq(resp *paho.PublishResponse) (int64, bool) {
	if resp.Properties == nil {
		return 0, false
	}
	seq, err := strconv.ParseInt(resp.Properties.User.Get("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return 0, false
	}
	return seq, true
}

// findSentMaxPages bounds the history search for a committed message.
const findSentMaxPages = 50

// findSent looks up the seq of p, which chatd has acknowledged as
// committed, in the conversation's history: newest pages first, until the
// message is found or the pages are older than p can be. It returns seq 0
// and no error when the message was not found.
func (c *Client) findSent(p PendingSend) (Outcome, error) {
	elapsed := time.Since(p.QueuedAt)
	var before int64 // 0: from the newest
	var oldest time.Time
	for page := 0; page < findSentMaxPages; page++ {
		ctx, cancel := context.WithTimeout(c.life, c.cfg.RequestTimeout)
		msgs, err := c.History(ctx, p.ConversationID, HistoryOptions{BeforeSeq: before, Limit: 200})
		cancel()
		if err != nil {
			if c.life.Err() != nil {
				return Outcome{}, ErrClosed
			}
			return Outcome{}, err
		}
		if len(msgs) == 0 {
			return Outcome{}, nil
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].ClientMsgID == p.ClientMsgID {
				return Outcome{Seq: msgs[i].Seq, Recalled: p.Kind != KindRecall && msgs[i].Recalled}, nil
			}
		}
		if page == 0 {
			// The message committed after it was queued: no earlier than
			// the newest message's time minus the time since then (in the
			// server's clock, so without client clock skew), give or take.
			oldest = msgs[len(msgs)-1].CreatedAt.Add(-elapsed - time.Minute)
		}
		if msgs[0].Seq <= 1 || msgs[0].CreatedAt.Before(oldest) {
			return Outcome{}, nil
		}
		before = msgs[0].Seq
	}
	return Outcome{}, nil
}
