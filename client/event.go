package client

import "time"

// Event types (docs/protocol.md "Events").
const (
	EventMessageNew  = "message.new"
	EventReadUpdated = "read.updated"
	// EventDeliveryUpdated: a member's delivered watermark moved (one of
	// their sessions acknowledged messages up to Seq).
	EventDeliveryUpdated     = "delivery.updated"
	EventConversationCreated = "conversation.created"
	EventMemberAdded         = "member.added"
	EventMemberRemoved       = "member.removed"
	EventTyping              = "typing"
	EventPresence            = "presence"
	EventError               = "error"
)

// Event is one event for the application. message.new events arrive per
// conversation in seq order, each (ConversationID, Seq) once; the others
// (read.updated, delivery.updated, member.added, member.removed, typing,
// presence, error and types added later) are passed through as the server
// sent them.
type Event struct {
	Type           string `json:"type"`
	ConversationID int64  `json:"conversationId,omitempty"`
	// Seq is the message's seq for message.new, the new watermark for
	// read.updated, the conversation's last seq for member events.
	Seq         int64     `json:"seq,omitempty"`
	SenderID    int64     `json:"senderId,omitempty"`
	ClientMsgID string    `json:"clientMsgId,omitempty"`
	Body        string    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"createdAt,omitzero"`
	// UserID is the reader (read.updated), the member (member.*) or the
	// typist (typing).
	UserID           int64  `json:"userId,omitempty"`
	ActorID          int64  `json:"actorId,omitempty"`
	Role             string `json:"role,omitempty"`
	ConversationType string `json:"conversationType,omitempty"`
	Title            string `json:"title,omitempty"`
	// Online and LastSeen describe a presence event (UserID's state).
	Online   *bool      `json:"online,omitempty"`
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	// Code and Message describe an error event.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Members lists the first members (conversation.created).
	Members []int64 `json:"members,omitempty"`
	// FromHistory is set on messages the client fetched through history
	// (to fill a gap or catch up) rather than received live.
	FromHistory bool `json:"-"`
}

// wireEvent decodes an events-topic payload; Body is a pointer so that a
// slim message.new (large groups: no body) can be told from an empty one.
type wireEvent struct {
	Type             string     `json:"type"`
	ConversationID   int64      `json:"conversationId"`
	Seq              int64      `json:"seq"`
	SenderID         int64      `json:"senderId"`
	ClientMsgID      string     `json:"clientMsgId"`
	Body             *string    `json:"body"`
	CreatedAt        time.Time  `json:"createdAt"`
	UserID           int64      `json:"userId"`
	ActorID          int64      `json:"actorId"`
	Role             string     `json:"role"`
	ConversationType string     `json:"conversationType"`
	Title            *string    `json:"title"`
	Online           *bool      `json:"online"`
	LastSeen         *time.Time `json:"lastSeen"`
	Code             string     `json:"code"`
	Message          string     `json:"message"`
	Members          []int64    `json:"members"`
}

func (w wireEvent) event() Event {
	ev := Event{
		Type: w.Type, ConversationID: w.ConversationID, Seq: w.Seq, SenderID: w.SenderID,
		ClientMsgID: w.ClientMsgID, CreatedAt: w.CreatedAt, UserID: w.UserID, ActorID: w.ActorID,
		Role: w.Role, ConversationType: w.ConversationType, Online: w.Online, LastSeen: w.LastSeen,
		Code: w.Code, Message: w.Message, Members: w.Members,
	}
	if w.Body != nil {
		ev.Body = *w.Body
	}
	if w.Title != nil {
		ev.Title = *w.Title
	}
	return ev
}

// messageEvent is the message.new event of a message read from history.
func messageEvent(m Message) Event {
	return Event{
		Type: EventMessageNew, ConversationID: m.ConversationID, Seq: m.Seq, SenderID: m.SenderID,
		ClientMsgID: m.ClientMsgID, Body: m.Body, CreatedAt: m.CreatedAt, FromHistory: true,
	}
}
