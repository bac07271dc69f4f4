package delivery

import (
	"context"
	"log/slog"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// Packet is one PUBLISH to a client.
type Packet struct {
	Topic           string
	Payload         []byte
	QoS             byte
	PacketID        uint16 // 0 for QoS0
	CorrelationData []byte // MQTT v5 request/response
}

// Conn is a client connection as delivery sees it. WritePublishes writes
// the packets in order, ideally in one system call; it may block while the
// network is slow, and Close must unblock it.
type Conn interface {
	WritePublishes(ps []Packet) error
	Close(reason string)
}

// Store is what delivery reads from and writes to the store of record.
type Store interface {
	Cursors(ctx context.Context, clientID string, userID int64, stored bool) ([]store.ConvCursor, error)
	SinceMany(ctx context.Context, ranges []store.Range, perConv int) (map[int64][]chat.Message, error)
	SaveCursors(ctx context.Context, cs []store.Cursor) error
}

// Members lists a conversation's members (routing).
type Members interface {
	Members(ctx context.Context, conversationID int64) ([]int64, error)
}

// Options tune the hub; zero values take the defaults.
type Options struct {
	Window        int           // unacknowledged QoS1 publishes per session (64)
	QueueSize     int           // live events buffered per session before it falls back to PostgreSQL (1024)
	HubQueue      int           // committed events buffered before fan-out (65536)
	LargeGroup    int           // above this many members message.new carries no body (200)
	SlowTimeout   time.Duration // no ack progress with a full window, or one write blocked, this long: disconnect (30s)
	GapWait       time.Duration // how long an out-of-order event waits for the missing seq before PostgreSQL fills it (50ms)
	FetchLimit    int           // most messages read per conversation in one catch-up query (200)
	CursorFlush   time.Duration // delivered-cursor batch interval (1s; sessions that end flush at once)
	RecentPerConv int           // newest message.new payloads kept in memory per conversation for catch-up (256; negative: none)
	RecentBytes   int           // memory bound of those payloads over all conversations (64 MiB)
	Logger        *slog.Logger
	Metrics       *Metrics
	// Delivered is told every PUBACK of a message.new (the member's
	// delivered watermark); nil: not recorded.
	Delivered chat.DeliveredSink
	// Next gets the stored events Publish routed (the outbox relay's
	// wake-up); nil: none.
	Next chat.Publisher
}

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = 64
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 1024
	}
	if o.HubQueue <= 0 {
		o.HubQueue = 65536
	}
	if o.LargeGroup <= 0 {
		o.LargeGroup = 200
	}
	if o.SlowTimeout <= 0 {
		o.SlowTimeout = 30 * time.Second
	}
	if o.GapWait <= 0 {
		o.GapWait = 50 * time.Millisecond
	}
	if o.FetchLimit <= 0 {
		o.FetchLimit = 200
	}
	if o.RecentPerConv == 0 {
		o.RecentPerConv = 256
	}
	if o.RecentBytes <= 0 {
		o.RecentBytes = 64 << 20
	}
	if o.CursorFlush <= 0 {
		o.CursorFlush = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return o
}

// EventsTopic is the one topic a user's clients subscribe to.
func EventsTopic(userID int64) string {
	return "chat/v1/user/" + itoa(userID) + "/events"
}

type itemKind uint8

const (
	kMsg     itemKind = iota + 1 // message.new with a seq to order
	kEvent                       // any other event for the events topic
	kDirect                      // a reply or error for this client only, sent even before it subscribed
	kJoin                        // the user joined conv at seq: start tracking it
	kLeave                       // the user left conv: stop at once
	kReady                       // the client subscribed to its events topic
	kUnready                     // the client unsubscribed
)

type item struct {
	kind    itemKind
	conv    int64
	seq     int64
	payload []byte
	topic   string
	qos     byte
	corr    []byte
	at      time.Time // commit time, for end-to-end latency
}
