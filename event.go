package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Event types. They are the payloads of the outbox (and so of Kafka's
// chat.events) and of the MQTT events topic; the JSON is a public contract.
const (
	EventMessageNew          = "message.new"
	EventMessageEdited       = "message.edited"
	EventMessageRecalled     = "message.recalled"
	EventReactionUpdated     = "reaction.updated"
	EventReadUpdated         = "read.updated"
	EventDeliveryUpdated     = "delivery.updated"
	EventConversationCreated = "conversation.created"
	EventMemberAdded         = "member.added"
	EventMemberRemoved       = "member.removed"
	EventConversationUpdated = "conversation.updated"
	EventMemberUpdated       = "member.updated"
	EventProfileUpdated      = "profile.updated"
	EventSystemNew           = "system.new"
	EventTyping              = "typing"
	EventPresence            = "presence"
	EventError               = "error"
)

// Event is one change, flat so that every type encodes as documented and
// unused fields vanish. Seq is the entry's seq for message.new,
// message.edited, message.recalled and reaction.updated (TargetSeq the
// message they change), the new watermark for read.updated, and the
// conversation's last_seq at the time of a membership change, and for
// typing when the typist's membership was checked (not sent to clients:
// delivery shows a session the indicator only once it has every entry up
// to it, so that one whose removal it has not heard of yet gets none); downstream
// consumers de-duplicate by (type, conversationId, userId, seq) and by
// EventID when present.
type Event struct {
	Type           string           `json:"type"`
	EventID        int64            `json:"eventId,omitempty"` // outbox id, set by the relay; Kafka's alone, never sent to clients
	ConversationID int64            `json:"conversationId,omitempty"`
	Seq            int64            `json:"seq,omitempty"`
	TargetSeq      int64            `json:"targetSeq,omitempty"`
	SenderID       int64            `json:"senderId,omitempty"`
	ClientMsgID    string           `json:"clientMsgId,omitempty"`
	Body           *string          `json:"body,omitempty"`
	MsgType        string           `json:"msgType,omitempty"`
	Attachments    []Attachment     `json:"attachments,omitempty"`
	CreatedAt      *time.Time       `json:"createdAt,omitempty"`
	ReplyTo        *ReplyRef        `json:"replyTo,omitempty"`
	ForwardedFrom  *ForwardRef      `json:"forwardedFrom,omitempty"`
	EditedAt       *time.Time       `json:"editedAt,omitempty"`
	Recalled       bool             `json:"recalled,omitempty"`
	RecalledAt     *time.Time       `json:"recalledAt,omitempty"`
	Emoji          string           `json:"emoji,omitempty"`
	On             *bool            `json:"on,omitempty"`
	Count          *int             `json:"count,omitempty"`
	UserID         int64            `json:"userId,omitempty"`
	ActorID        int64            `json:"actorId,omitempty"`
	Role           Role             `json:"role,omitempty"`
	ConvType       ConversationType `json:"conversationType,omitempty"`
	Title          *string          `json:"title,omitempty"`
	Online         *bool            `json:"online,omitempty"`
	LastSeen       *time.Time       `json:"lastSeen,omitempty"`
	// Hidden: a presence event telling its recipients that they may no
	// longer see the user's presence (online false, no lastSeen).
	Hidden bool `json:"hidden,omitempty"`
	// BodyHidden: a message.edited whose body its receiver may not read
	// (BeforeFloor), so its empty body says nothing of the message's text,
	// unlike a real edit to "". Set per receiver; never in the outbox.
	BodyHidden bool   `json:"bodyHidden,omitempty"`
	Code       Code   `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
	// RetryAfter: an error event of a publish refused for a rate limit
	// says in how many seconds to retry (RateLimitInfo.RetryAfterSeconds).
	RetryAfter int64 `json:"retryAfter,omitempty"`
	// Members lists the conversation's members after a membership change,
	// so every node can refresh its routing without a query.
	Members []int64 `json:"members,omitempty"`

	// People and groups (people.go): a system entry's action and the
	// settings it or conversation.updated carries; a profile.updated's
	// profile.
	Action         string     `json:"action,omitempty"`
	About          *string    `json:"about,omitempty"`
	Avatar         *string    `json:"avatar,omitempty"`
	HistoryVisible string     `json:"historyVisible,omitempty"`
	DisplayName    *string    `json:"displayName,omitempty"`
	UpdatedAt      *time.Time `json:"updatedAt,omitempty"`
	// Private: a read.updated of a user whose read receipts are off, for
	// that user's own sessions only. Except: members who must not get
	// this read.updated (their own read receipts are off). Both travel
	// with the event to other nodes and Kafka consumers; delivery strips
	// Except before a client sees it.
	Private bool    `json:"private,omitempty"`
	Except  []int64 `json:"except,omitempty"`
	// LastSeq: read.updated's and delivery.updated's position in its
	// conversation, the conversation's last_seq as the watermark moved
	// (Seq, the watermark, may be far older). Delivery shows the event to a session only once
	// it has every entry up to it, so that a member whose removal came
	// first gets none: their session never gets past the removal. Travels
	// with the event to other nodes and Kafka consumers, like Except;
	// delivery strips it before a client sees it.
	LastSeq int64 `json:"lastSeq,omitempty"`
	// PresenceHiddenFrom and PresenceHidden: a member.removed that ended
	// the last conversation of at most LargeGroup members its user shared
	// with some users lists those who may no longer see the user's
	// presence (they could before), and those whose presence the user may
	// no longer see: every node tells them so (PresenceEndedEvents).
	// Travel with the event to other nodes and Kafka consumers; delivery
	// strips them before a client sees it.
	PresenceHiddenFrom []int64 `json:"presenceHiddenFrom,omitempty"`
	PresenceHidden     []int64 `json:"presenceHidden,omitempty"`
	// PresenceShown: a member.added or conversation.created that made
	// users start sharing a conversation of at most LargeGroup members
	// (they shared none before) maps each of them who may now see others'
	// presence to those others: every node gives them their current state
	// (PresenceStartedWatchers). Travels with the event to other nodes
	// and Kafka consumers; delivery strips it before a client sees it.
	PresenceShown map[int64][]int64 `json:"presenceShown,omitempty"`

	// To names the users an event without a conversation is for
	// (presence, profile.updated); never encoded.
	To []int64 `json:"-"`
	// Trace is the trace of the write that made the event, for the
	// fan-out's span; empty when it is not traced. Never encoded: Kafka
	// carries it in record headers.
	Trace TraceContext `json:"-"`
}

// TraceContext is a W3C trace context (www.w3.org/TR/trace-context) as
// its two headers write it. It is how a trace follows a write across the
// hops where no context.Context can go: group commit's queue, the fan-out
// queue, the outbox row and the Kafka record. The zero value is "not
// traced".
type TraceContext struct {
	Parent string // traceparent: version-traceid-spanid-flags
	State  string // tracestate, often empty
}

// MessageEvent builds message.new for a committed message, as it is now:
// a recalled message as AsRecalled leaves it (no body) and saying
// recalled, an edited one with its current body and editedAt.
func MessageEvent(m Message) Event {
	if m.Recalled {
		m = m.AsRecalled(m.RecalledAt)
	}
	// The timestamp and the body the event points to share one heap
	// object: one allocation per committed message instead of two.
	v := &struct {
		at   time.Time
		body string
	}{at: m.CreatedAt}
	ev := Event{
		Type:           EventMessageNew,
		ConversationID: m.ConversationID,
		Seq:            m.Seq,
		SenderID:       m.SenderID,
		ClientMsgID:    m.ClientMsgID,
		CreatedAt:      &v.at,
		ReplyTo:        m.ReplyTo,
		ForwardedFrom:  m.ForwardedFrom,
		EditedAt:       m.EditedAt,
		MsgType:        m.MsgType,
	}
	if m.Recalled {
		ev.Recalled, ev.RecalledAt = true, m.RecalledAt
	} else {
		v.body = m.Body
		ev.Body, ev.Attachments = &v.body, m.Attachments
	}
	return ev
}

// EntryEvent builds the event of a committed entry of any kind:
// message.new, message.edited, message.recalled or reaction.updated.
func EntryEvent(m Message) Event {
	at := m.CreatedAt
	switch m.Kind {
	case KindEdit:
		body := m.Body
		return Event{Type: EventMessageEdited, ConversationID: m.ConversationID, Seq: m.Seq, TargetSeq: m.TargetSeq,
			SenderID: m.SenderID, ClientMsgID: m.ClientMsgID, Body: &body, EditedAt: &at, BodyHidden: m.BodyHidden}
	case KindRecall:
		return Event{Type: EventMessageRecalled, ConversationID: m.ConversationID, Seq: m.Seq, TargetSeq: m.TargetSeq,
			ActorID: m.SenderID, RecalledAt: &at}
	case KindReaction:
		on, count := m.On, m.Count
		return Event{Type: EventReactionUpdated, ConversationID: m.ConversationID, Seq: m.Seq, TargetSeq: m.TargetSeq,
			UserID: m.SenderID, Emoji: m.Emoji, On: &on, Count: &count}
	case KindSystem:
		return SystemEvent(m)
	}
	return MessageEvent(m)
}

// IsEntry reports whether ev is an entry of a conversation's stream (it
// has a seq of its own and fills that slot).
func (e Event) IsEntry() bool {
	switch e.Type {
	case EventMessageNew, EventMessageEdited, EventMessageRecalled, EventReactionUpdated, EventSystemNew:
		return true
	}
	return false
}

// Writer is the user whose write entry ev is: the sender of a message or
// an edit, the recaller, the reactor. Writing an entry moves the writer's
// read watermark to it (the send transaction does), so their own sessions'
// acknowledgements of it tell nothing about delivery. 0 for a system
// entry, written on a member's behalf and moving no watermark, and for
// anything that is not an entry.
func (e Event) Writer() int64 {
	switch e.Type {
	case EventMessageNew, EventMessageEdited:
		return e.SenderID
	case EventMessageRecalled:
		return e.ActorID
	case EventReactionUpdated:
		return e.UserID
	}
	return 0
}

// Slim returns an entry's event without its content: what members of
// large groups receive for messages and reactions; clients fetch the rest
// through history.
func (e Event) Slim() Event {
	switch e.Type {
	case EventMessageNew:
		// msgType stays: enough for "sent a photo".
		return Event{Type: e.Type, ConversationID: e.ConversationID, Seq: e.Seq, SenderID: e.SenderID, MsgType: e.MsgType}
	case EventReactionUpdated:
		return Event{Type: e.Type, ConversationID: e.ConversationID, Seq: e.Seq, TargetSeq: e.TargetSeq, UserID: e.UserID}
	}
	return e
}

// EncodeEvent is the one encoder of event JSON: the outbox, Kafka, the
// MQTT events topic and replayed history all carry what it writes.
func EncodeEvent(ev Event) ([]byte, error) {
	// encoding/json takes an interface: an Event put in one is copied to
	// the heap (half a kilobyte, for every event encoded). A pointer to a
	// pooled copy is not, and the encoder keeps nothing of it after
	// Encode. No field has a pointer-receiver MarshalJSON, so the pointer
	// encodes as the value does.
	p := eventCopies.Get().(*Event)
	*p = ev
	b, err := EncodeJSON(p)
	*p = Event{} // no body or attachments kept alive by the pool
	eventCopies.Put(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	return b, nil
}

// EncodeJSON is json.Marshal without its HTML escaping: what chatd sends
// (events, HTTP and RPC answers) is never put into HTML, and escaping made
// a body of code or markup up to six times larger (\u003c for <, and so
// for > and &), past a small client's Maximum Packet Size.
func EncodeJSON(v any) ([]byte, error) {
	buf := jsonBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			jsonBufs.Put(buf)
		}
	}()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return bytes.Clone(b[:len(b)-1]), nil // Encode ends it with a newline
}

// eventCopies are EncodeEvent's copies of the events it encodes.
var eventCopies = sync.Pool{New: func() any { return new(Event) }}

// jsonBufs are EncodeJSON's buffers (those up to 64 KiB are kept).
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Ephemeral reports whether ev is never stored: typing and presence reach
// the clients online now and nobody else.
func (e Event) Ephemeral() bool {
	return e.Type == EventTyping || e.Type == EventPresence
}

// ReadEvent builds read.updated for a watermark that advanced.
func ReadEvent(conversationID, userID, seq int64) Event {
	return Event{Type: EventReadUpdated, ConversationID: conversationID, UserID: userID, Seq: seq}
}

// MemberAddedEvent builds member.added. lastSeq is the conversation's
// last_seq when the member joined.
func MemberAddedEvent(conv Conversation, userID, actorID int64, role Role) Event {
	title := conv.Title
	return Event{Type: EventMemberAdded, ConversationID: conv.ID, ConvType: conv.Type, Title: &title,
		UserID: userID, ActorID: actorID, Role: role, Seq: conv.LastSeq}
}

// ConversationCreatedEvent builds conversation.created: one event listing
// every first member, instead of one member.added per member, so creating
// a group of n costs n deliveries, not n².
func ConversationCreatedEvent(conv Conversation, actorID int64) Event {
	title := conv.Title
	ids := make([]int64, len(conv.Members))
	for i, m := range conv.Members {
		ids[i] = m.UserID
	}
	return Event{Type: EventConversationCreated, ConversationID: conv.ID, ConvType: conv.Type, Title: &title,
		ActorID: actorID, Members: ids, Seq: conv.LastSeq}
}

// PresenceEndedEvents are the presence events a member.removed owes
// (PresenceHiddenFrom, PresenceHidden): hidden, about its user, to those
// who may no longer see the user's presence; hidden, about each of those
// whose presence the user may no longer see, to the user. local says
// whether a user has a connection here: the events go to this node's
// sessions alone (every node gets the member.removed), so none is built
// for a user with none.
func PresenceEndedEvents(ev Event, local func(int64) bool) []Event {
	if ev.Type != EventMemberRemoved || ev.UserID <= 0 {
		return nil
	}
	var out []Event
	to := make([]int64, 0, len(ev.PresenceHiddenFrom))
	for _, u := range ev.PresenceHiddenFrom {
		if local(u) {
			to = append(to, u)
		}
	}
	if len(to) > 0 {
		h := PresenceEvent(Presence{UserID: ev.UserID, Hidden: true})
		h.To = to
		out = append(out, h)
	}
	if len(ev.PresenceHidden) > 0 && local(ev.UserID) {
		for _, u := range ev.PresenceHidden {
			h := PresenceEvent(Presence{UserID: u, Hidden: true})
			h.To = []int64{ev.UserID}
			out = append(out, h)
		}
	}
	return out
}

// PresenceStartedWatchers is whom a member.added or conversation.created
// owes whose current state (PresenceShown): for each user whose presence
// someone may now see, those of the watchers who have a connection here
// (local): every node gets the event and tells its own sessions alone.
func PresenceStartedWatchers(ev Event, local func(int64) bool) map[int64][]int64 {
	if ev.Type != EventMemberAdded && ev.Type != EventConversationCreated {
		return nil
	}
	var out map[int64][]int64
	for w, subjects := range ev.PresenceShown {
		if !local(w) {
			continue
		}
		if out == nil {
			out = map[int64][]int64{}
		}
		for _, s := range subjects {
			out[s] = append(out[s], w)
		}
	}
	return out
}

// MemberRemovedEvent builds member.removed.
func MemberRemovedEvent(conversationID, userID, actorID, lastSeq int64) Event {
	return Event{Type: EventMemberRemoved, ConversationID: conversationID, UserID: userID, ActorID: actorID, Seq: lastSeq}
}
