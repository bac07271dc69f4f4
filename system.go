package chat

import (
	"encoding/json"
	"fmt"
	"time"
)

// SystemEntry is what a system entry of a conversation's stream records: a
// change of the group itself, made by the entry's actor (Message.SenderID).
// Membership and settings changes are entries so that history shows them
// ("Ann renamed the group") and a member who was offline catches up on them
// like on messages, in seq order, with no other mechanism.
type SystemEntry struct {
	Action SystemAction `json:"action"`
	// UserID is the member the change is about (added, removed, left, new
	// role, new owner).
	UserID int64 `json:"userId,omitempty"`
	Role   Role  `json:"role,omitempty"`
	// A group.updated entry carries the settings that changed, as they
	// are after it (Avatar "" when removed).
	Title          *string `json:"title,omitempty"`
	About          *string `json:"about,omitempty"`
	Avatar         *string `json:"avatar,omitempty"`
	HistoryVisible string  `json:"historyVisible,omitempty"`
}

// SystemAction names what a system entry records.
type SystemAction string

const (
	SystemGroupUpdated  SystemAction = "group.updated"  // title, about, avatar or historyVisible changed
	SystemMemberAdded   SystemAction = "member.added"   // UserID added (Role)
	SystemMemberRemoved SystemAction = "member.removed" // UserID removed by the actor
	SystemMemberLeft    SystemAction = "member.left"    // UserID (the actor) left
	SystemRoleChanged   SystemAction = "role.changed"   // UserID's role is now Role
	SystemOwnerChanged  SystemAction = "owner.changed"  // UserID owns the group now (transfer, or the owner left)
)

// systemJSON is how a system entry reads in history and replies.
type systemJSON struct {
	ConversationID int64     `json:"conversationId"`
	Seq            int64     `json:"seq"`
	Kind           EntryKind `json:"kind"`
	ActorID        int64     `json:"actorId"`
	ClientMsgID    string    `json:"clientMsgId"`
	CreatedAt      time.Time `json:"createdAt"`
	SystemEntry
}

func marshalSystem(j entryJSON, m Message) ([]byte, error) {
	s := systemJSON{ConversationID: j.ConversationID, Seq: j.Seq, Kind: KindSystem, ActorID: m.SenderID,
		ClientMsgID: j.ClientMsgID, CreatedAt: j.CreatedAt}
	if m.System != nil {
		s.SystemEntry = *m.System
	}
	return EncodeJSON(s)
}

func unmarshalSystem(b []byte, m *Message) error {
	var s systemJSON
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	e := s.SystemEntry
	m.SenderID, m.System, m.Body = s.ActorID, &e, ""
	return nil
}

// EncodeSystemEntry is the text a system entry's row holds (the message
// table's body column: chat_send_batch writes it as given).
func EncodeSystemEntry(e SystemEntry) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("encode system entry: %w", err)
	}
	return string(b), nil
}

// DecodeSystemEntry reads what EncodeSystemEntry wrote.
func DecodeSystemEntry(s string) (*SystemEntry, error) {
	var e SystemEntry
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("decode system entry: %w", err)
	}
	return &e, nil
}

// SystemEvent builds system.new for a committed system entry.
func SystemEvent(m Message) Event {
	at := m.CreatedAt
	ev := Event{Type: EventSystemNew, ConversationID: m.ConversationID, Seq: m.Seq, ActorID: m.SenderID,
		ClientMsgID: m.ClientMsgID, CreatedAt: &at}
	if s := m.System; s != nil {
		ev.Action, ev.UserID, ev.Role, ev.Title, ev.About, ev.Avatar, ev.HistoryVisible =
			string(s.Action), s.UserID, s.Role, s.Title, s.About, s.Avatar, s.HistoryVisible
	}
	return ev
}

// ConversationUpdatedEvent builds conversation.updated: a group's settings
// as they are after actorID changed them in the system entry seq.
func ConversationUpdatedEvent(conv Conversation, actorID, seq int64) Event {
	title, about, avatar := conv.Title, conv.About, ""
	if conv.Avatar != nil {
		avatar = *conv.Avatar
	}
	return Event{Type: EventConversationUpdated, ConversationID: conv.ID, ActorID: actorID, Seq: seq,
		Title: &title, About: &about, Avatar: &avatar, HistoryVisible: conv.HistoryVisible}
}

// MemberUpdatedEvent builds member.updated: userID's role is now role
// (a role change, or either side of an ownership transfer).
func MemberUpdatedEvent(conversationID, userID, actorID int64, role Role, seq int64) Event {
	return Event{Type: EventMemberUpdated, ConversationID: conversationID, UserID: userID, ActorID: actorID, Role: role, Seq: seq}
}

// ProfileUpdatedEvent builds profile.updated for users (Event.To).
func ProfileUpdatedEvent(p Profile, to []int64) Event {
	name, about, avatar := p.DisplayName, p.About, ""
	if p.Avatar != nil {
		avatar = *p.Avatar
	}
	return Event{Type: EventProfileUpdated, UserID: p.ID, DisplayName: &name, About: &about, Avatar: &avatar,
		UpdatedAt: p.UpdatedAt, To: to}
}
