package client

import (
	"time"

	chat "github.com/chatd/chatd"
)

// Event types (docs/protocol.md "Events"): the server's own names.
const (
	EventMessageNew = chat.EventMessageNew
	// EventMessageEdited, EventMessageRecalled and EventReactionUpdated
	// are changes of a message (TargetSeq), each an entry of the
	// conversation's stream with a Seq of its own.
	EventMessageEdited   = chat.EventMessageEdited
	EventMessageRecalled = chat.EventMessageRecalled
	EventReactionUpdated = chat.EventReactionUpdated
	EventReadUpdated     = chat.EventReadUpdated
	// EventDeliveryUpdated: a member's delivered watermark moved (one of
	// their sessions acknowledged messages up to Seq).
	EventDeliveryUpdated     = chat.EventDeliveryUpdated
	EventConversationCreated = chat.EventConversationCreated
	EventMemberAdded         = chat.EventMemberAdded
	EventMemberRemoved       = chat.EventMemberRemoved
	// EventMemberUpdated: a member's role changed (Role); also both sides
	// of an ownership transfer.
	EventMemberUpdated = chat.EventMemberUpdated
	// EventConversationUpdated: a group's title, about, avatar or
	// historyVisible changed (the settings after it).
	EventConversationUpdated = chat.EventConversationUpdated
	// EventProfileUpdated: UserID's profile changed (DisplayName, Avatar,
	// About), or UserID blocked or unblocked someone and sent it again
	// unchanged. A user UserID blocked gets DisplayName alone (Avatar and
	// About empty) while the block holds. Keep the one whose UpdatedAt is
	// not older than the one held: the block's and the unblock's carry
	// the UpdatedAt held, and change the blocked user's view.
	EventProfileUpdated = chat.EventProfileUpdated
	// EventSystemNew is a system entry of a conversation's stream (a
	// membership or settings change, Action), with a Seq of its own.
	EventSystemNew = chat.EventSystemNew
	EventTyping    = chat.EventTyping
	EventPresence  = chat.EventPresence
	EventError     = chat.EventError
)

// Event is one event for the application. The entries of a conversation's
// stream (message.new, message.edited, message.recalled, reaction.updated)
// arrive per conversation in seq order, each (ConversationID, Seq) once;
// the others (read.updated, delivery.updated, member.added, member.removed,
// typing, presence, error and types added later) are passed through as the
// server sent them.
type Event struct {
	Type           string `json:"type"`
	ConversationID int64  `json:"conversationId,omitempty"`
	// Seq is the entry's seq for message.new and the changes, the new
	// watermark for read.updated, the conversation's last seq for member
	// events; TargetSeq is the message a change changes.
	Seq         int64     `json:"seq,omitempty"`
	TargetSeq   int64     `json:"targetSeq,omitempty"`
	SenderID    int64     `json:"senderId,omitempty"`
	ClientMsgID string    `json:"clientMsgId,omitempty"`
	Body        string    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"createdAt,omitzero"`
	// A message's type by its first attachment ("" is text) and its
	// files (message.new); download them with Download.
	MsgType     string       `json:"msgType,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// A message's references and state (message.new): what it replies to
	// or forwards, its last edit, whether it was recalled.
	ReplyTo       *ReplyRef   `json:"replyTo,omitempty"`
	ForwardedFrom *ForwardRef `json:"forwardedFrom,omitempty"`
	EditedAt      *time.Time  `json:"editedAt,omitempty"`
	Recalled      bool        `json:"recalled,omitempty"`
	RecalledAt    *time.Time  `json:"recalledAt,omitempty"`
	// BodyHidden: an edit (message.edited) of a message from before the
	// user's join to a group whose history is "joined": its Body is empty
	// because its text is not theirs to read, not because the text was
	// cleared (an edit that cleared it has an empty Body without it).
	BodyHidden bool `json:"bodyHidden,omitempty"`
	// A reaction's emoji, set (On) or removed, and how many carry it now.
	Emoji string `json:"emoji,omitempty"`
	On    bool   `json:"on,omitempty"`
	Count int    `json:"count,omitempty"`
	// UserID is the reader (read.updated), the member (member.*) or the
	// typist (typing).
	UserID           int64  `json:"userId,omitempty"`
	ActorID          int64  `json:"actorId,omitempty"`
	Role             string `json:"role,omitempty"`
	ConversationType string `json:"conversationType,omitempty"`
	Title            string `json:"title,omitempty"`
	// Online and LastSeen describe a presence event (UserID's state);
	// Hidden says instead that the user's presence may no longer be
	// seen (they turned it off, or blocked the client's user).
	Online   *bool      `json:"online,omitempty"`
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	Hidden   bool       `json:"hidden,omitempty"`
	// Code and Message describe an error event.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Members lists the first members (conversation.created).
	Members []int64 `json:"members,omitempty"`
	// A system entry's Action (system.new), the settings it or
	// conversation.updated carries, and profile.updated's profile.
	Action         string `json:"action,omitempty"`
	About          string `json:"about,omitempty"`
	Avatar         string `json:"avatar,omitempty"`
	HistoryVisible string `json:"historyVisible,omitempty"`
	DisplayName    string `json:"displayName,omitempty"`
	// Private: a read.updated of the user's own, whose read receipts are
	// off (no other member got it).
	Private bool `json:"private,omitempty"`
	// FromHistory is set on messages the client fetched through history
	// (to fill a gap or catch up) rather than received live.
	FromHistory bool `json:"-"`
}

// eventOf is the application's view of an events-topic payload, decoded
// as the server's own chat.Event so that the two cannot drift apart.
func eventOf(w chat.Event) Event {
	ev := Event{
		Type: w.Type, ConversationID: w.ConversationID, Seq: w.Seq, TargetSeq: w.TargetSeq, SenderID: w.SenderID,
		ClientMsgID: w.ClientMsgID, UserID: w.UserID, ActorID: w.ActorID,
		Role: string(w.Role), ConversationType: string(w.ConvType), Online: w.Online, LastSeen: w.LastSeen, Hidden: w.Hidden,
		Code: string(w.Code), Message: w.Message, Members: w.Members,
		ReplyTo: w.ReplyTo, ForwardedFrom: w.ForwardedFrom, EditedAt: w.EditedAt, Recalled: w.Recalled,
		RecalledAt: w.RecalledAt, BodyHidden: w.BodyHidden, Emoji: w.Emoji,
		MsgType: w.MsgType, Attachments: w.Attachments,
		Action: w.Action, HistoryVisible: w.HistoryVisible, Private: w.Private,
	}
	for dst, src := range map[*string]*string{&ev.About: w.About, &ev.Avatar: w.Avatar, &ev.DisplayName: w.DisplayName, &ev.Body: w.Body, &ev.Title: w.Title} {
		if src != nil {
			*dst = *src
		}
	}
	if w.CreatedAt != nil {
		ev.CreatedAt = *w.CreatedAt
	}
	if w.On != nil {
		ev.On = *w.On
	}
	if w.Count != nil {
		ev.Count = *w.Count
	}
	return ev
}

// slim reports whether an entry's event came without its content (large
// groups): the client completes it through history.
func slim(w chat.Event) bool {
	switch w.Type {
	case EventMessageNew:
		return w.Body == nil && !w.Recalled
	case EventReactionUpdated:
		return w.On == nil
	}
	return false
}

// isEntry reports whether events of typ are entries of a conversation's
// stream, each filling its seq's slot: the server's rule.
func isEntry(typ string) bool { return chat.Event{Type: typ}.IsEntry() }

// messageEvent is the event of an entry read from history: a message as
// it is now, or the edit, recall or reaction it is.
func messageEvent(m Message) Event {
	ev := Event{
		Type: EventMessageNew, ConversationID: m.ConversationID, Seq: m.Seq, TargetSeq: m.TargetSeq, SenderID: m.SenderID,
		ClientMsgID: m.ClientMsgID, Body: m.Body, CreatedAt: m.CreatedAt, FromHistory: true,
		ReplyTo: m.ReplyTo, ForwardedFrom: m.ForwardedFrom, EditedAt: m.EditedAt, Recalled: m.Recalled, RecalledAt: m.RecalledAt,
		MsgType: m.MsgType, Attachments: m.Attachments,
	}
	switch m.Kind {
	case KindEdit:
		at := m.CreatedAt
		ev.Type, ev.EditedAt, ev.BodyHidden = EventMessageEdited, &at, m.BodyHidden
	case KindRecall:
		at := m.CreatedAt
		ev.Type, ev.ActorID, ev.SenderID, ev.RecalledAt = EventMessageRecalled, m.ActorID, 0, &at
	case KindReaction:
		ev.Type, ev.UserID, ev.SenderID, ev.Emoji, ev.On, ev.Count = EventReactionUpdated, m.UserID, 0, m.Emoji, m.On, m.Count
	case KindSystem:
		ev.Type, ev.ActorID, ev.SenderID, ev.UserID, ev.Role, ev.Action = EventSystemNew, m.ActorID, 0, m.UserID, m.Role, m.Action
		ev.Title, ev.About, ev.Avatar, ev.HistoryVisible = m.Title, m.About, m.Avatar, m.HistoryVisible
	}
	return ev
}
