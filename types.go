package chat

import "time"

// ConversationType is DIRECT (exactly two users, one per pair) or GROUP.
type ConversationType string

const (
	Direct ConversationType = "DIRECT"
	Group  ConversationType = "GROUP"
)

// Role of a member. Owners and admins manage membership; an admin cannot
// remove the owner.
type Role string

const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// Conversation as clients see it. Members is filled only by calls that say so.
//
// JoinSeq is where the caller's current membership starts: their
// join_seq, the last seq when they were last added (their member.added
// entry is the next one), 0 for a member since the conversation's
// creation. The entries after it came while they were a member. In a
// group whose history is "joined" it is their history floor too; in one
// whose history is "all" they read what came before it as well (the
// floor is 0), but a client that hands new entries on starts a
// conversation joined while it was offline after it.
type Conversation struct {
	ID            int64            `json:"id"`
	Type          ConversationType `json:"type"`
	Title         string           `json:"title"`
	LastSeq       int64            `json:"lastSeq"`
	JoinSeq       int64            `json:"joinSeq"`
	LastMessageAt *time.Time       `json:"lastMessageAt"`
	CreatedAt     time.Time        `json:"createdAt"`
	Members       []Member         `json:"members,omitempty"`
	// A group's settings (PATCH /v1/conversations/{id}): its description,
	// avatar (an https URL, null for none), and what members added later
	// read (HistoryJoined or HistoryAll); empty for direct conversations.
	About          string  `json:"about"`
	Avatar         *string `json:"avatar"`
	HistoryVisible string  `json:"historyVisible,omitempty"`
	// PeerID is the other member of a direct conversation.
	PeerID int64 `json:"peerId,omitempty"`
}

// Member of a conversation with their watermarks.
type Member struct {
	UserID           int64     `json:"userId"`
	Role             Role      `json:"role"`
	LastReadSeq      int64     `json:"lastReadSeq"`
	LastDeliveredSeq int64     `json:"lastDeliveredSeq"`
	JoinedAt         time.Time `json:"joinedAt"`
}

// Message is one committed entry of a conversation's stream: a message
// (Kind message, the zero Kind too) with its current state, or an edit,
// recall or reaction of one (TargetSeq). SenderID is whoever wrote the
// entry: the sender, editor, recaller or reactor. Its JSON is the entry as
// its kind reads (entry.go).
type Message struct {
	ConversationID int64
	Seq            int64
	Kind           EntryKind
	SenderID       int64
	ClientMsgID    string
	Body           string // empty once recalled
	CreatedAt      time.Time

	// A system entry's change (Kind system).
	System *SystemEntry
	// A message's files (none once recalled) and its type by the first
	// of them: MsgImage, MsgAudio, MsgVideo or MsgFile ("" is MsgText).
	MsgType     string
	Attachments []Attachment

	// A message's state.
	ReplyTo       *ReplyRef
	ForwardedFrom *ForwardRef
	EditedAt      *time.Time
	Recalled      bool
	RecalledAt    *time.Time
	Reactions     []ReactionCount

	// An edit's, recall's or reaction's message, and a reaction's emoji,
	// set or removed, and how many carried it after this change.
	TargetSeq int64
	Emoji     string
	On        bool
	// BodyHidden: an edit whose new body the reader may not read
	// (HideBeforeFloor emptied it), as opposed to an edit to "".
	BodyHidden bool
	Count      int
}

// IsMessage reports whether the entry is a message (not a change of one).
func (m Message) IsMessage() bool { return m.Kind == "" || m.Kind == KindMessage }

// Writer is the user whose write entry m is (Event.Writer): its SenderID,
// or 0 for a system entry.
func (m Message) Writer() int64 {
	if m.Kind == KindSystem {
		return 0
	}
	return m.SenderID
}

// SendRequest is one message to commit. ClientMsgID is a UUID chosen by the
// client; it makes resends idempotent. ReplyTo is the seq of the message
// it replies to (0: none); Forward, the message whose body it copies (Body
// must then be empty). Attachments are uploads of the sender's made for
// the conversation; Body may then be empty.
type SendRequest struct {
	ConversationID int64
	SenderID       int64
	ClientMsgID    string
	Body           string
	ReplyTo        int64
	Forward        *MessageRef
	Attachments    []AttachmentRef
}

// GroupRequest is a group to create: CreatorID owns it, Members are the
// others (the creator and duplicates among them are ignored). Key, when
// set, is the creator's idempotency key, a UUID the client picks once per
// group and sends again with every retry: a create repeated with it
// answers the group the first one made and makes no other.
type GroupRequest struct {
	CreatorID int64
	Title     string
	Members   []int64
	Key       string
}

// SendPayload is a send as a client writes it, the same on every
// transport: the payload of an MQTT publish to a conversation's msg topic
// and the body of POST /v1/conversations/{id}/messages. The topic or path
// names the conversation, the connection or token the sender.
type SendPayload struct {
	ClientMsgID string          `json:"clientMsgId"`
	Body        string          `json:"body"`
	ReplyTo     int64           `json:"replyTo"`
	Forward     *MessageRef     `json:"forward"`
	Attachments []AttachmentRef `json:"attachments"`
}

// Request is the send of p by senderID to conversationID.
func (p SendPayload) Request(conversationID, senderID int64) SendRequest {
	return SendRequest{ConversationID: conversationID, SenderID: senderID, ClientMsgID: p.ClientMsgID,
		Body: p.Body, ReplyTo: p.ReplyTo, Forward: p.Forward, Attachments: p.Attachments}
}

// SendResult is the committed message; Duplicate reports that ClientMsgID
// had already been committed by this sender and nothing new was written.
type SendResult struct {
	Message   Message
	Duplicate bool
}

// ReadResult of MarkRead: Advanced is false when the watermark did not move.
type ReadResult struct {
	Advanced    bool  `json:"advanced"`
	LastReadSeq int64 `json:"lastReadSeq"`
}

// HistoryQuery pages a conversation's messages. With AfterSeq > 0 it returns
// the messages after it (filling gaps forward); otherwise the newest messages
// below BeforeSeq (0 = from the newest). Results are always ascending by seq.
type HistoryQuery struct {
	ConversationID int64
	UserID         int64
	BeforeSeq      int64
	AfterSeq       int64
	// Forward pages forward from AfterSeq even when it is 0 (from the
	// first message); transports set it when afterSeq was given at all.
	Forward bool
	Limit   int
}

// History limits.
const (
	DefaultHistoryLimit = 50
	MaxHistoryLimit     = 200
	DefaultInboxLimit   = 50
	MaxInboxLimit       = 200
)

// ClampLimit applies a default and a maximum to a client-given page size.
func ClampLimit(limit, def, max int) int {
	if limit <= 0 {
		return def
	}
	if limit > max {
		return max
	}
	return limit
}

// InboxEntry is one conversation in a user's inbox; JoinSeq is where the
// caller's current membership starts (Conversation).
type InboxEntry struct {
	ID            int64            `json:"id"`
	Type          ConversationType `json:"type"`
	Title         string           `json:"title"`
	LastSeq       int64            `json:"lastSeq"`
	LastReadSeq   int64            `json:"lastReadSeq"`
	JoinSeq       int64            `json:"joinSeq"`
	Unread        int64            `json:"unread"`
	LastMessageAt *time.Time       `json:"lastMessageAt"`
	LastMessage   *Message         `json:"lastMessage"`
	// DeliveredSeq and ReadSeq are the lowest delivered and read
	// watermarks of the other members: the caller's messages up to
	// DeliveredSeq reached every other member, up to ReadSeq every other
	// member read them (0 when there is nobody else).
	DeliveredSeq int64 `json:"deliveredSeq"`
	ReadSeq      int64 `json:"readSeq"`
	// PeerID is the other member of a direct conversation; Avatar a
	// group's avatar (the peer's profile has a direct conversation's).
	PeerID int64   `json:"peerId,omitempty"`
	Avatar *string `json:"avatar,omitempty"`
	// Settings are the caller's mute settings of the conversation.
	Settings *ConversationSettings `json:"settings,omitempty"`
}

// InboxPage is a page of the inbox, newest first; NextCursor is empty on the
// last page.
type InboxPage struct {
	Conversations []InboxEntry `json:"conversations"`
	NextCursor    string       `json:"nextCursor"`
}

// SeenResult answers "seen by N": members other than the sender whose read
// watermark is at or past seq, out of Members (all members but the sender).
// DeliveredTo counts those whose delivered watermark is at or past seq (a
// member who read a message has it delivered too, so DeliveredTo >= SeenBy).
type SeenResult struct {
	SeenBy      int `json:"seenBy"`
	DeliveredTo int `json:"deliveredTo"`
	Members     int `json:"members"`
	// Hidden: the caller turned read receipts off, so they see nobody's
	// (SeenBy is 0). Members who turned theirs off are never in SeenBy.
	Hidden bool `json:"hidden,omitempty"`
}
