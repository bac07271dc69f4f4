package chat

import "context"

// Store is the store of record. Every method is one transaction; events
// (outbox rows) commit with the change they describe, and every write
// publishes what it committed (Publisher) before it returns. Implementations return
// *Error values (typed) for every outcome a client can cause, and wrap
// infrastructure failures with Unavailable.
type Store interface {
	// Send commits a message, or returns the one already committed under
	// the same (conversation, clientMsgId) by the same sender with
	// Duplicate set. Another sender's clientMsgId is ErrConflict.
	Send(ctx context.Context, req SendRequest) (SendResult, error)
	// SubmitSend queues a send and returns at once; done gets the outcome
	// of Send exactly once, from another goroutine, after the commit (and
	// after its event was published). Sends submitted one after another
	// commit in that order within their conversation. done must not block.
	SubmitSend(ctx context.Context, req SendRequest, done func(SendResult, error))
	// Change commits one change of any kind (a message, edit, recall or
	// reaction) as Send does, each taking the conversation's next seq;
	// SubmitChange is its SubmitSend.
	Change(ctx context.Context, c Change) (ChangeResult, error)
	SubmitChange(ctx context.Context, c Change, done func(ChangeResult, error))
	// MarkRead moves the user's watermark to min(seq, last_seq) if that is
	// ahead of the current one.
	MarkRead(ctx context.Context, conversationID, userID, seq int64) (ReadResult, error)
	History(ctx context.Context, q HistoryQuery) ([]Message, error)
	Inbox(ctx context.Context, userID int64, limit int, cursor string) (InboxPage, error)
	// SeenBy counts the members other than the message's sender whose read
	// watermark is >= seq; the caller must be a member.
	SeenBy(ctx context.Context, conversationID, userID, seq int64) (SeenResult, error)

	// CreateGroup creates a group; created is false when a create with
	// the same creator and key made it before (nothing written).
	CreateGroup(ctx context.Context, g GroupRequest) (conv Conversation, created bool, err error)
	// OpenDirect returns the one DIRECT conversation of the pair, creating
	// it if needed; created reports which.
	OpenDirect(ctx context.Context, userID, peerID int64) (conv Conversation, created bool, err error)
	// GetConversation returns the conversation with its members; members only.
	GetConversation(ctx context.Context, conversationID, userID int64) (Conversation, error)
	// AddMember adds userID; created is false when they already were a
	// member (nothing written).
	AddMember(ctx context.Context, conversationID, actorID, userID int64, role Role) (m Member, created bool, err error)
	// RemoveMember removes userID.
	RemoveMember(ctx context.Context, conversationID, actorID, userID int64) error
	// Members lists the user ids of a conversation (routing; no auth check).
	Members(ctx context.Context, conversationID int64) ([]int64, error)
	// IsMember reports membership (routing and ACL; no auth check).
	IsMember(ctx context.Context, conversationID, userID int64) (bool, error)
	// Typing publishes userID's typing event to the conversation's
	// members if userID is one (not_member otherwise) and not the blocked
	// member of a direct conversation (blocked); nothing is stored.
	Typing(ctx context.Context, conversationID, userID int64) error
}
