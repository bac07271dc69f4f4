package client

import (
	"context"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

// Message is one committed entry of a conversation's stream, as history
// returns it: a message (Kind "message") with its current state, or an
// edit (SenderID), recall (ActorID) or reaction (UserID) of message
// TargetSeq.
type Message struct {
	ConversationID int64     `json:"conversationId"`
	Seq            int64     `json:"seq"`
	Kind           string    `json:"kind"`
	TargetSeq      int64     `json:"targetSeq,omitempty"`
	SenderID       int64     `json:"senderId,omitempty"`
	ActorID        int64     `json:"actorId,omitempty"`
	UserID         int64     `json:"userId,omitempty"`
	ClientMsgID    string    `json:"clientMsgId"`
	Body           string    `json:"body"`
	CreatedAt      time.Time `json:"createdAt"`
	// A message's files and its type by the first: "image", "audio",
	// "video" or "file" ("" is text).
	MsgType     string       `json:"msgType,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// A message's state.
	ReplyTo       *ReplyRef   `json:"replyTo,omitempty"`
	ForwardedFrom *ForwardRef `json:"forwardedFrom,omitempty"`
	EditedAt      *time.Time  `json:"editedAt,omitempty"`
	Recalled      bool        `json:"recalled,omitempty"`
	RecalledAt    *time.Time  `json:"recalledAt,omitempty"`
	Reactions     []Reaction  `json:"reactions,omitempty"`
	// A reaction's emoji, set (On) or removed, and its count after it.
	Emoji string `json:"emoji,omitempty"`
	On    bool   `json:"on,omitempty"`
	Count int    `json:"count,omitempty"`
	// BodyHidden: an edit whose new text the user may not read (its
	// message is from before their join to a group whose history is
	// "joined"); Body is empty. An edit that cleared the text has an
	// empty Body without it.
	BodyHidden bool `json:"bodyHidden,omitempty"`
	// A system entry: what ActorID changed (Action), the member it is
	// about (UserID, Role), a group.updated's new settings.
	Action         string `json:"action,omitempty"`
	Role           string `json:"role,omitempty"`
	Title          string `json:"title,omitempty"`
	About          string `json:"about,omitempty"`
	Avatar         string `json:"avatar,omitempty"`
	HistoryVisible string `json:"historyVisible,omitempty"`
}

// Entry kinds of Message.Kind.
const (
	KindMessage  = "message"
	KindEdit     = "edit"
	KindRecall   = "recall"
	KindReaction = "reaction"
	// KindSystem: a membership or settings change (Action: group.updated,
	// member.added, member.removed, member.left, role.changed,
	// owner.changed).
	KindSystem = "system"
)

type (
	// ReplyRef is the message a message replies to, as it is now: its
	// Snippet is its first 100 characters and its MsgType its type (as
	// Message.MsgType: "" a text), so a quote of a photo, voice note or
	// file sent without a caption can say what it quotes; both empty
	// once recalled.
	ReplyRef = chat.ReplyRef
	// ForwardRef is the message a forwarded message copies.
	ForwardRef = chat.ForwardRef
)

// Reaction is one emoji on a message: how many set it, whether you did.
type Reaction struct {
	Emoji string `json:"emoji"`
	Count int    `json:"count"`
	Me    bool   `json:"me"`
}

// Conversation with its members (when the call returns them).
type Conversation struct {
	ID            int64      `json:"id"`
	Type          string     `json:"type"` // "DIRECT" or "GROUP"
	Title         string     `json:"title"`
	LastSeq       int64      `json:"lastSeq"`
	JoinSeq       int64      `json:"joinSeq"` // where the user's membership starts (InboxEntry)
	LastMessageAt *time.Time `json:"lastMessageAt"`
	CreatedAt     time.Time  `json:"createdAt"`
	Members       []Member   `json:"members,omitempty"`
	// A group's settings; PeerID is a direct conversation's other member.
	About          string  `json:"about"`
	Avatar         *string `json:"avatar"`
	HistoryVisible string  `json:"historyVisible,omitempty"`
	PeerID         int64   `json:"peerId,omitempty"`
}

// Member of a conversation with their watermarks.
type Member struct {
	UserID           int64     `json:"userId"`
	Role             string    `json:"role"` // owner, admin or member
	LastReadSeq      int64     `json:"lastReadSeq"`
	LastDeliveredSeq int64     `json:"lastDeliveredSeq"`
	JoinedAt         time.Time `json:"joinedAt"`
}

// InboxEntry is one conversation of the inbox. JoinSeq is where the
// user's current membership starts: the last seq when they were last
// added (0 for a member since its creation). The entries after it came
// while they were a member; in a group whose history is "all", history
// has those before it too.
type InboxEntry struct {
	ID            int64      `json:"id"`
	Type          string     `json:"type"`
	Title         string     `json:"title"`
	LastSeq       int64      `json:"lastSeq"`
	LastReadSeq   int64      `json:"lastReadSeq"`
	JoinSeq       int64      `json:"joinSeq"`
	Unread        int64      `json:"unread"`
	LastMessageAt *time.Time `json:"lastMessageAt"`
	LastMessage   *Message   `json:"lastMessage"`
	PeerID        int64      `json:"peerId,omitempty"` // a direct conversation's other member
	Avatar        *string    `json:"avatar,omitempty"` // a group's
	// Settings are the caller's settings of the conversation (nil from
	// a server without push).
	Settings *ConversationSettings `json:"settings,omitempty"`
}

// InboxPage is a page of the inbox, most recent activity first; pass
// NextCursor as InboxOptions.Cursor for the next page ("" on the last).
type InboxPage struct {
	Conversations []InboxEntry `json:"conversations"`
	NextCursor    string       `json:"nextCursor"`
}

// InboxOptions page the inbox: Limit defaults to 50 (at most 200).
type InboxOptions struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// HistoryOptions select a page of history. With AfterSeq (or Forward),
// the messages after AfterSeq (forwards; Forward with AfterSeq 0 starts at
// seq 1); otherwise the newest below BeforeSeq (0: from the newest). Limit
// defaults to 50 (at most 200). Pages are ascending by seq.
type HistoryOptions struct {
	BeforeSeq int64
	AfterSeq  int64
	// Forward pages forwards from AfterSeq even when it is 0: afterSeq is
	// then sent explicitly, which chatd reads as a cursor.
	Forward bool
	Limit   int
}

// Seen answers "seen by N": members other than the sender whose read
// watermark reached the seq, out of Members (all members but the sender).
type Seen struct {
	SeenBy  int `json:"seenBy"`
	Members int `json:"members"`
	// Hidden: the user's read receipts are off, so they see nobody's.
	Hidden bool `json:"hidden,omitempty"`
}

// ReadResult is the watermark after a read receipt; Advanced is false
// when it did not move.
type ReadResult = chat.ReadResult

// Inbox returns a page of the user's conversations.
func (c *Client) Inbox(ctx context.Context, o InboxOptions) (InboxPage, error) {
	return callFor[InboxPage](ctx, c, "inbox", o, true)
}

// History returns a page of a conversation's messages, ascending by seq.
func (c *Client) History(ctx context.Context, conversationID int64, o HistoryOptions) ([]Message, error) {
	// afterSeq is sent whenever paging forwards, also when it is 0: a
	// present afterSeq is a cursor for chatd, an absent one means "the
	// newest page".
	var after *int64
	if o.Forward || o.AfterSeq != 0 {
		after = &o.AfterSeq
	}
	params := struct {
		ConversationID int64  `json:"conversationId"`
		BeforeSeq      int64  `json:"beforeSeq,omitempty"`
		AfterSeq       *int64 `json:"afterSeq,omitempty"`
		Limit          int    `json:"limit,omitempty"`
	}{conversationID, o.BeforeSeq, after, o.Limit}
	var reply struct {
		Messages []Message `json:"messages"`
	}
	err := c.call(ctx, "history", params, &reply, true)
	return reply.Messages, err
}

// Conversation returns a conversation with its members and roles.
func (c *Client) Conversation(ctx context.Context, conversationID int64) (Conversation, error) {
	return callFor[Conversation](ctx, c, "conversation.get", convParams{conversationID}, true)
}

// CreateGroup creates a group owned by the user with the given other
// members. The call carries a key of its own (clientMsgId), so when the
// connection drops before the reply it is asked again and chatd answers
// the group the first request made, if it did: one call, one group.
func (c *Client) CreateGroup(ctx context.Context, title string, members []int64) (Conversation, error) {
	if members == nil {
		members = []int64{}
	}
	params := struct {
		Type        string  `json:"type"`
		Title       string  `json:"title"`
		Members     []int64 `json:"members"`
		ClientMsgID string  `json:"clientMsgId"`
	}{"group", title, members, uuid.NewString()}
	return callFor[Conversation](ctx, c, "conversation.create", params, true)
}

// OpenDirect returns the direct conversation with peer, creating it if
// needed (created reports which). It is asked again when the connection
// drops before the reply; created is then false if the first request
// created the conversation.
func (c *Client) OpenDirect(ctx context.Context, peer int64) (conv Conversation, created bool, err error) {
	var reply struct {
		Status int `json:"status"`
		Conversation
	}
	err = c.call(ctx, "direct.open", struct {
		PeerID int64 `json:"peerId"`
	}{peer}, &reply, true)
	return reply.Conversation, reply.Status == 201, err
}

// AddMember adds user to a group (owner or admin only); adding a member
// twice returns the existing membership.
func (c *Client) AddMember(ctx context.Context, conversationID, user int64) (Member, error) {
	return callFor[Member](ctx, c, "members.add", memberParams{conversationID, user}, true)
}

// RemoveMember removes user from a group, or leaves it when user is the
// caller. Asked again after a lost reply: chatd answers a repeated leave,
// and a removal repeated by whoever made it, as the first.
func (c *Client) RemoveMember(ctx context.Context, conversationID, user int64) error {
	return c.call(ctx, "members.remove", memberParams{conversationID, user}, nil, true)
}

// SeenBy counts the members who have read message seq.
func (c *Client) SeenBy(ctx context.Context, conversationID, seq int64) (Seen, error) {
	return callFor[Seen](ctx, c, "seen", seqParams{conversationID, seq}, true)
}

// MarkReadNow moves the read watermark at once, bypassing MarkRead's
// debounce, and returns the result.
func (c *Client) MarkReadNow(ctx context.Context, conversationID, seq int64) (ReadResult, error) {
	return callFor[ReadResult](ctx, c, "read", seqParams{conversationID, seq}, true)
}

type convParams struct {
	ConversationID int64 `json:"conversationId"`
}

type memberParams struct {
	ConversationID int64 `json:"conversationId"`
	UserID         int64 `json:"userId"`
}

type seqParams struct {
	ConversationID int64 `json:"conversationId"`
	Seq            int64 `json:"seq"`
}
