package chat

import (
	"encoding/json"
	"time"
	"unicode"
	"unicode/utf8"
)

// EntryKind says what an entry of a conversation's stream is. Every
// change members see takes the conversation's next seq: a message, or a
// change of one.
type EntryKind string

const (
	KindMessage  EntryKind = "message"
	KindEdit     EntryKind = "edit"     // a message's new body, by its sender
	KindRecall   EntryKind = "recall"   // a message taken back for everyone
	KindReaction EntryKind = "reaction" // an emoji set on or removed from a message
	KindSystem   EntryKind = "system"   // a membership or settings change (SystemEntry)
)

// ReplyRef is the message a message replies to, as it is now: its first
// 100 characters and its type (Message.MsgType: "" a text), so a quote of
// a photo sent without a caption has something to show; or Recalled, and
// neither.
type ReplyRef struct {
	Seq      int64  `json:"seq"`
	SenderID int64  `json:"senderId"`
	Snippet  string `json:"snippet"`
	MsgType  string `json:"msgType,omitempty"`
	Recalled bool   `json:"recalled,omitempty"`
}

// AsRecalled is m as a recall leaves it, recalled at at: the one rule of
// what a recalled message (or an edit of one) shows wherever it is read:
// history, catch-up, events, Kafka, a resend's answer, the inbox. What
// remains says only that an entry was written, by whom, when, and when it
// was recalled (its seq, kind, sender, clientMsgId, time, target); nothing
// of what it said (body, type, files, reactions, edits) or where it came
// from (the message it replied to, the one it forwarded, whose
// conversation a member may not be in). A field added to Message is erased
// here unless it is kept by name.
func (m Message) AsRecalled(at *time.Time) Message {
	return Message{ConversationID: m.ConversationID, Seq: m.Seq, Kind: m.Kind, SenderID: m.SenderID,
		ClientMsgID: m.ClientMsgID, CreatedAt: m.CreatedAt, TargetSeq: m.TargetSeq, Recalled: true, RecalledAt: at}
}

// MessageRef names a message of a conversation.
type MessageRef struct {
	ConversationID int64 `json:"conversationId"`
	Seq            int64 `json:"seq"`
}

// ForwardRef is the message a forwarded message copies.
type ForwardRef struct {
	ConversationID int64 `json:"conversationId"`
	Seq            int64 `json:"seq"`
	SenderID       int64 `json:"senderId"`
}

// ReactionCount is one emoji on a message: how many carry it, and whether
// the reader is one of them.
type ReactionCount struct {
	Emoji string `json:"emoji"`
	Count int    `json:"count"`
	Me    bool   `json:"me"`
}

// Change is one write to a conversation's stream: a message (with
// ReplyTo or Forward), an edit, a recall or a reaction. ClientMsgID makes
// it idempotent, whatever its kind.
type Change struct {
	Kind           EntryKind
	ConversationID int64
	UserID         int64 // the sender, editor, recaller or reactor
	ClientMsgID    string
	Body           string      // message, edit
	TargetSeq      int64       // edit, recall, reaction
	ReplyTo        int64       // message: the seq it replies to (0: none)
	Forward        *MessageRef // message: the message it copies
	Emoji          string      // reaction
	On             bool        // reaction: set (true) or remove
	// message: the uploads it carries (1 to MaxAttachments)
	Attachments []AttachmentRef
}

// ChangeResult is a committed change. Duplicate says ClientMsgID had been
// committed by this user already and nothing new was written; Unchanged
// says the change asked for what already was (a reaction already set or
// already absent, a message already recalled) and nothing was written.
type ChangeResult struct {
	Entry     Message
	Duplicate bool
	Unchanged bool
}

// SendChange is the Change of a send.
func (r SendRequest) Change() Change {
	return Change{Kind: KindMessage, ConversationID: r.ConversationID, UserID: r.SenderID, ClientMsgID: r.ClientMsgID,
		Body: r.Body, ReplyTo: r.ReplyTo, Forward: r.Forward, Attachments: r.Attachments}
}

// EditRequest changes a message's body.
type EditRequest struct {
	ConversationID, UserID, TargetSeq int64
	ClientMsgID, Body                 string
}

// RecallRequest takes a message back for everyone.
type RecallRequest struct {
	ConversationID, UserID, TargetSeq int64
	ClientMsgID                       string
}

// ReactionRequest sets (On) or removes an emoji on a message.
type ReactionRequest struct {
	ConversationID, UserID, TargetSeq int64
	ClientMsgID, Emoji                string
	On                                bool
}

// MaxEmojiBytes bounds a reaction's emoji; MaxReactionsPerUser bounds the
// distinct emoji one user sets on one message; MaxReactionKinds bounds the
// distinct emoji all members together set on one message. Without the
// last, members (or a few accounts) could pile any number of emoji onto a
// message, and every reaction.updated consumer, history page and catch-up
// would carry them all. It is as many as one user may set (one user can
// still use the whole row) and Discord's cap; a new emoji past it is
// refused (CodeTooManyReactions), one already there can still be added
// to. migrations/functions.sql (chat_send_batch) holds the same numbers.
const (
	MaxEmojiBytes       = 32
	MaxReactionsPerUser = 20
	MaxReactionKinds    = 20
	SnippetRunes        = 100
)

// ValidateEmoji requires 1-32 bytes of UTF-8 without whitespace or control
// characters. One being set (on) must also show, as a group title must
// (hasControl, showsSomething): it is drawn beside its count and the
// other reactions, which a bidirectional override would rearrange and
// where a zero-width joiner alone would be a count of nothing. Removal
// takes any emoji the first rule allows, so that one set before the second
// rule held can still be taken off.
func ValidateEmoji(e string, on bool) error {
	if e == "" || len(e) > MaxEmojiBytes {
		return Errorf(CodeInvalid, "emoji must be 1 to %d bytes of UTF-8", MaxEmojiBytes)
	}
	if !utf8.ValidString(e) {
		return Errorf(CodeInvalid, "emoji is not valid UTF-8")
	}
	for _, r := range e {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return Errorf(CodeInvalid, "emoji must not contain whitespace or control characters")
		}
	}
	if !on {
		return nil
	}
	if hasControl(e, false) {
		return Errorf(CodeInvalid, "emoji must not contain line-separator or bidirectional-override characters")
	}
	if !showsSomething(e) {
		return Errorf(CodeInvalid, "emoji must have a visible character")
	}
	return nil
}

// entryJSON is how an entry of each kind reads in history and replies.
type entryJSON struct {
	ConversationID int64           `json:"conversationId"`
	Seq            int64           `json:"seq"`
	Kind           EntryKind       `json:"kind"`
	TargetSeq      int64           `json:"targetSeq,omitempty"`
	SenderID       int64           `json:"senderId,omitempty"`
	ActorID        int64           `json:"actorId,omitempty"`
	UserID         int64           `json:"userId,omitempty"`
	ClientMsgID    string          `json:"clientMsgId"`
	Body           *string         `json:"body,omitempty"`
	MsgType        string          `json:"msgType,omitempty"`
	Attachments    []Attachment    `json:"attachments,omitempty"`
	CreatedAt      time.Time       `json:"createdAt"`
	ReplyTo        *ReplyRef       `json:"replyTo,omitempty"`
	ForwardedFrom  *ForwardRef     `json:"forwardedFrom,omitempty"`
	EditedAt       *time.Time      `json:"editedAt,omitempty"`
	Recalled       bool            `json:"recalled,omitempty"`
	RecalledAt     *time.Time      `json:"recalledAt,omitempty"`
	Reactions      []ReactionCount `json:"reactions,omitempty"`
	Emoji          string          `json:"emoji,omitempty"`
	On             *bool           `json:"on,omitempty"`
	Count          *int            `json:"count,omitempty"`
	BodyHidden     bool            `json:"bodyHidden,omitempty"`
}

// MarshalJSON writes an entry as its kind reads: a message with its
// current state (body after the last edit, or recalled and no body;
// reactions; what it replies to or forwards); an edit, recall or reaction
// with its target and who made it (senderId, actorId, userId).
func (m Message) MarshalJSON() ([]byte, error) {
	kind := m.Kind
	if kind == "" {
		kind = KindMessage
	}
	j := entryJSON{ConversationID: m.ConversationID, Seq: m.Seq, Kind: kind, ClientMsgID: m.ClientMsgID, CreatedAt: m.CreatedAt}
	body := m.Body
	switch kind {
	case KindMessage:
		if m.Recalled {
			m = m.AsRecalled(m.RecalledAt)
		}
		j.SenderID, j.ReplyTo, j.ForwardedFrom, j.EditedAt, j.Reactions = m.SenderID, m.ReplyTo, m.ForwardedFrom, m.EditedAt, m.Reactions
		j.MsgType, j.Attachments = m.MsgType, m.Attachments
		if m.Recalled {
			j.Recalled, j.RecalledAt = true, m.RecalledAt
		} else {
			j.Body = &body
		}
	case KindEdit:
		j.TargetSeq, j.SenderID, j.Body, j.BodyHidden = m.TargetSeq, m.SenderID, &body, m.BodyHidden
	case KindRecall:
		j.TargetSeq, j.ActorID = m.TargetSeq, m.SenderID
	case KindReaction:
		on, count := m.On, m.Count
		j.TargetSeq, j.UserID, j.Emoji, j.On, j.Count = m.TargetSeq, m.SenderID, m.Emoji, &on, &count
	case KindSystem:
		return marshalSystem(j, m)
	default:
		j.SenderID, j.Body = m.SenderID, &body
	}
	return EncodeJSON(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Message) UnmarshalJSON(b []byte) error {
	var j entryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = Message{ConversationID: j.ConversationID, Seq: j.Seq, Kind: j.Kind, TargetSeq: j.TargetSeq,
		SenderID: j.SenderID, ClientMsgID: j.ClientMsgID, CreatedAt: j.CreatedAt, ReplyTo: j.ReplyTo,
		ForwardedFrom: j.ForwardedFrom, EditedAt: j.EditedAt, Recalled: j.Recalled, RecalledAt: j.RecalledAt,
		Reactions: j.Reactions, Emoji: j.Emoji, MsgType: j.MsgType, Attachments: j.Attachments, BodyHidden: j.BodyHidden}
	if m.Kind == "" {
		m.Kind = KindMessage
	}
	if j.Body != nil {
		m.Body = *j.Body
	}
	switch {
	case j.ActorID != 0:
		m.SenderID = j.ActorID
	case j.UserID != 0:
		m.SenderID = j.UserID
	}
	if j.On != nil {
		m.On = *j.On
	}
	if j.Count != nil {
		m.Count = *j.Count
	}
	if m.Kind == KindSystem {
		return unmarshalSystem(b, m)
	}
	return nil
}

// UTC returns m with its times in UTC, as events and history write them
// whatever the host's zone.
func (m Message) UTC() Message {
	m.CreatedAt = m.CreatedAt.UTC()
	for _, t := range []**time.Time{&m.EditedAt, &m.RecalledAt} {
		if *t != nil {
			u := (**t).UTC()
			*t = &u
		}
	}
	return m
}
