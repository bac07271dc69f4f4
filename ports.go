package chat

import (
	"context"
	"time"
)

// Publisher receives every change the moment it becomes visible: the store
// publishes what each write committed, right after its commit and before
// the writer's caller is answered, in commit order within a conversation;
// ephemeral events (typing, presence) are published as they happen.
// delivery.Hub implements it (fan-out to this node's sessions, then a
// wake-up of the outbox relay). Publish must not block and must not keep
// evs.
type Publisher interface {
	Publish(evs ...Event)
}

// UnsettledPublisher is what a Publisher that routes events by who belongs
// to their conversation (delivery.Hub) implements besides, to hear of a
// write that may change that (a join, a leave, a group's settings) from
// right before its COMMIT until its events were published: once
// PostgreSQL committed it, entries committed after it may reach the
// publisher before them (its answer on the way back, or lost, and its
// outcome asked about for seconds or not learnt at all). Unsettled says
// so for the write's conversations: until the matching Settled, what the
// publisher knows of their members may be out of date, and it must read
// them again after each event it routes. The store calls Settled once it
// knows the outcome, after publishing the write's events if it
// committed. Neither blocks; each Unsettled of a conversation is ended by
// one Settled.
type UnsettledPublisher interface {
	Unsettled(conversationIDs ...int64)
	Settled(conversationIDs ...int64)
}

// DeliveredSink records that one of a member's sessions acknowledged
// message seq (the delivered watermark). It never blocks; the store
// flushes what it collected in batches.
type DeliveredSink interface {
	Delivered(conversationID, userID, seq int64)
}

// Positions in the stream, as delivery and the store of record exchange
// them.

// ConvCursor is where delivery of one conversation stands for a session.
type ConvCursor struct {
	ConversationID int64
	Delivered      int64 // highest seq acknowledged
	LastSeq        int64 // conversation's last_seq when read
	JoinSeq        int64 // the member's join_seq: entries after it are theirs
	MemberCount    int
	// End is the last seq owed in a conversation the user left while the
	// session was away (0: a member): delivery catches up to it and stops.
	// With JoinSeq set too, the user was added back since: delivery
	// catches up to End, then goes on after JoinSeq.
	End int64
	// Rejoins, with End set, are the memberships that followed the one
	// ending at End and ended too, oldest first: the user was added back
	// and removed again while the session was behind. Delivery catches up
	// to End, then delivers each of them, then goes on after JoinSeq
	// (when set): nothing committed between a leave and the next join.
	Rejoins []Span
}

// Span is one past membership of a conversation: the entries after Join
// up to End were the user's.
type Span struct{ Join, End int64 }

// Cursor is one delivered-cursor update of a session.
type Cursor struct {
	ClientID       string
	ConversationID int64
	Seq            int64
}

// Range asks for the messages of a conversation after a seq: up to Until
// when it is set (a conversation the user left: the last seq they are
// owed), else only while the user is a member whose membership began at
// or before After (what they are owed now).
type Range struct {
	ConversationID int64
	After          int64
	Until          int64
}

// DeliveryStore is what delivery reads from and writes to the store of
// record (store.Sessions).
type DeliveryStore interface {
	// Cursors returns, for every conversation userID belongs to, where
	// clientID's delivery stands; with stored false (no persistent
	// session) every cursor is the conversation's last_seq. With stored
	// true it also returns, with End set, the conversations the user left
	// whose entries up to the leave the session has not all acknowledged,
	// and, in Rejoins, the memberships after it that ended too.
	Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]ConvCursor, error)
	// SinceMany returns up to perConv messages after each range's seq,
	// grouped by conversation in seq order, in one round trip, as userID
	// may read them (HideBeforeFloor with their history floor). A range
	// without Until gets nothing unless userID is a member since at most
	// its After: nothing committed after a leave, or while they were away.
	// One with Until reads its messages as they were at the leave (an
	// edit after it is not the user's to read).
	SinceMany(ctx context.Context, userID int64, ranges []Range, perConv int) (map[int64][]Message, error)
	// SaveCursors moves sessions' delivered cursors forward (never back).
	SaveCursors(ctx context.Context, cs []Cursor) error
	// Members lists who a conversation's events go to, with their
	// history floors (routing).
	Members(ctx context.Context, conversationID int64) (Routing, error)
}

// Routing is who a conversation's events go to: its members, each with
// their history floor (HideBeforeFloor), which live delivery applies as
// history and catch-up do.
type Routing struct {
	Members []int64 // ascending
	// Floors[i] is Members[i]'s history floor; nil when every floor is 0
	// (most conversations: no memory spent on them).
	Floors []int64
	// Seq is the conversation's last_seq when the members were read: a
	// membership event before it is in them (one at it is not: its entry
	// follows it).
	Seq int64
}

// SessionStore keeps the durable state of MQTT sessions (store.Sessions):
// all of it, so that an offline session costs the node nothing and
// resumes on any node, after any restart.
type SessionStore interface {
	// Open claims clientID for userID (ErrClientIDTaken when another user
	// holds it) and prepares its cursors; a persistent session that
	// resumes keeps its cursors and its subscriptions. token names the
	// connection opening it, unique across nodes and restarts: the
	// session is that connection's until another opens it.
	Open(ctx context.Context, clientID, token string, userID int64, persistent, clean bool, expiry time.Duration) (OpenedSession, error)
	// SaveSubscriptions records all of a persistent session's
	// subscriptions, replacing what was recorded, unless a connection other
	// than token's opened the session since.
	SaveSubscriptions(ctx context.Context, clientID, token string, subs []Subscription) error
	// Touch records that the session was seen now (its expiry, which the
	// client may have changed on DISCONNECT, starts), if the connection
	// token opened it last.
	Touch(ctx context.Context, clientID, token string, expiry time.Duration) error
	// Drop deletes a session and its cursors, if the connection token
	// opened it last: a connection that ends after its client reconnected
	// elsewhere leaves the session to the new connection.
	Drop(ctx context.Context, clientID, token string) error
}

// OpenedSession is what Open found.
type OpenedSession struct {
	// Resumed: a persistent session's stored cursors were kept.
	Resumed bool
	// Present: it also resumes with the subscriptions recorded for it
	// (MQTT's session present); false for a session recorded before
	// subscriptions were (the client subscribes again).
	Present       bool
	Subscriptions []Subscription
}

// Subscription is an MQTT subscription of a persistent session.
type Subscription struct {
	Filter string `json:"filter"`
	QoS    byte   `json:"qos"`
}

// ErrClientIDTaken says an MQTT client id belongs to another user.
var ErrClientIDTaken = Errorf(CodeForbidden, "client id belongs to another user")

// What delivery writes to a client connection and what transports ask of
// delivery.

// Packet is one PUBLISH to a client. An empty Topic is the client's events
// topic.
type Packet struct {
	Topic           string
	Payload         []byte
	QoS             byte
	PacketID        uint16 // 0 for QoS 0
	CorrelationData []byte // MQTT v5 request/response
	// TooLarge is set by Conn.Write on a packet it did not write because
	// it exceeds the client's MQTT 5 Maximum Packet Size.
	TooLarge bool
}

// Ack is the answer to one QoS 1 publish of a client (a PUBACK), or, with
// Close set, the end of the connection instead of an answer: the client
// resends what was not acknowledged.
type Ack struct {
	PacketID uint16
	Reason   byte   // MQTT v5 reason code (0 success); v3.1.1 clients get a plain PUBACK
	Message  string // v5 reason string
	Props    []KV   // v5 user properties
	Close    string // not empty: close the connection, with this reason, instead
	// Sent, when set, is called once the acknowledgement was written
	// (err nil) or could not be (the connection failed or closed first):
	// how a traced publish learns that its PUBACK is on the wire.
	Sent func(err error)
}

// KV is one MQTT v5 user property.
type KV struct{ Key, Val string }

// Conn is a client connection as delivery sees it. Write writes the acks,
// then the packets, in order, ideally in one system call; it may block
// while the network is slow, and Close must unblock it. A packet larger
// than the client accepts (its MQTT 5 Maximum Packet Size) is discarded
// unwritten and marked TooLarge, and the caller behaves as if it had been
// sent and acknowledged (MQTT-3.1.2-25): the client could never get it,
// and ending the connection instead would meet it again on every
// reconnect.
type Conn interface {
	Write(acks []Ack, ps []Packet) error
	Close(reason string)
}

// AckedConn is a Conn that can tell how many bytes its client's TCP has
// acknowledged since the connection opened (false: unknown). While a
// write to a slow client blocks on its full socket, a client whose TCP
// acknowledges more is taking what it is sent, however long the kernel
// keeps the write waiting (Linux wakes a blocked writer only once a third
// of the send buffer drained): delivery's watchdog counts that as
// progress.
type AckedConn interface {
	Conn
	Acked() (uint64, bool)
}

// Delivery is what transports ask of the delivery layer (delivery.Hub):
// one session per connected client, writing that client's events, replies
// and acknowledgements on its own goroutine.
type Delivery interface {
	// Attach starts delivery for a connected client (a session already
	// running under clientID is stopped first). ready says the client is
	// subscribed to its events topic already. receiveMaximum, when above
	// 0, is the client's own bound on its unacknowledged QoS 1 publishes
	// (MQTT 5 Receive Maximum): the session's window is the smaller of it
	// and the server's. Once delivery is stopping (the server shuts
	// down) it starts nothing and returns an error with CodeUnavailable:
	// the client should connect again.
	Attach(conn Conn, clientID string, userID int64, persistent, ready bool, receiveMaximum int) error
	// Detach stops clientID's session if conn still owns it.
	Detach(clientID string, conn Conn)
	// SetReady tells clientID's session, if conn still owns it, whether
	// its client is subscribed to its events topic; events wait until it
	// is.
	SetReady(clientID string, conn Conn, ready bool)
	// Acked hands the client's PUBACK of one of its deliveries to its
	// session, if conn still owns it: a PUBACK an old connection read
	// after a takeover names the old session's packet id, not the new
	// one's.
	Acked(clientID string, conn Conn, packetID uint16)
	// SendDirect queues a publish for one connection only (RPC replies,
	// error events), sent even before it subscribed; false when conn no
	// longer owns clientID's session here. An answer belongs to the
	// connection that asked: once it is gone, the client id may be
	// another user's (a clean session's id is free again when it ends),
	// and the answer must not reach them.
	SendDirect(clientID string, conn Conn, p Packet) bool
	// Reply queues acknowledgements of the client's own publishes, written
	// in the order given, before its next deliveries; never dropped.
	Reply(clientID string, conn Conn, acks []Ack)
	// After runs fn on the session's goroutine once everything queued for
	// conn before it (acknowledgements, direct publishes, deliveries) was
	// written: how the connection that revoked its own tokens gets the
	// answer before it is closed. fn must not block. False when conn no
	// longer owns clientID's session here (fn is not run); fn is not run
	// either when the connection ends first.
	After(clientID string, conn Conn, fn func()) bool
}

// EntryReader reads committed entries as they are now, a reply's quote
// (ReplyRef.Snippet) as it was at the reply, as its commit published it
// live (the outbox relay encodes referencing outbox rows with it).
type EntryReader interface {
	// Entries returns the entries refs name that exist, by ref.
	Entries(ctx context.Context, refs []MessageRef) (map[MessageRef]Message, error)
}
