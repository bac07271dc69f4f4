package delivery

import (
	"log/slog"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tracing"
)

// Options tune the hub; zero values take the defaults.
type Options struct {
	Window        int           // unacknowledged QoS1 publishes per session (64)
	QueueSize     int           // live events buffered per session before it falls back to PostgreSQL (1024)
	HubQueue      int           // committed events buffered before fan-out (65536)
	LargeGroup    int           // above this many members message.new carries no body (200)
	SlowTimeout   time.Duration // no ack progress with a full window, or one write blocked without its client's TCP acknowledging more, this long: disconnect (30s)
	GapWait       time.Duration // how long an out-of-order event waits for the missing seq before PostgreSQL fills it (50ms)
	FetchLimit    int           // most messages read per conversation in one catch-up query (200)
	CursorFlush   time.Duration // delivered-cursor batch interval (5s; sessions that end flush at once)
	RecentPerConv int           // newest message.new payloads kept in memory per conversation for catch-up (256; negative: none)
	RecentBytes   int           // memory bound of those payloads over all conversations (64 MiB)
	// MemberIndexSize bounds the conversations whose members the fan-out
	// keeps in memory (100,000; the least recently routed is forgotten).
	MemberIndexSize int
	Logger          *slog.Logger
	Metrics         *Metrics
	// Delivered is told every PUBACK of a message.new (the member's
	// delivered watermark); nil: not recorded.
	Delivered chat.DeliveredSink
	// Next gets the stored events Publish routed (the outbox relay's
	// wake-up); nil: none.
	Next chat.Publisher
	// Tracer traces the fan-out of traced events (chat.Event.Trace); nil:
	// tracing off.
	Tracer *tracing.Tracer
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
	if o.MemberIndexSize <= 0 {
		o.MemberIndexSize = 100000
	}
	if o.CursorFlush <= 0 {
		o.CursorFlush = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return o
}

type itemKind uint8

const (
	kMsg     itemKind = iota + 1 // message.new with a seq to order
	kEvent                       // any other event for the events topic
	kTyping                      // a typing indicator: kEvent, for a member whose stream reached its seq
	kDirect                      // a reply or error for this client only, sent even before it subscribed
	kJoin                        // the user joined conv at seq: start tracking it
	kLeave                       // the user left conv: stop at once
	kReady                       // the client subscribed to its events topic
	kUnready                     // the client unsubscribed
	kAfter                       // run after: once what was queued before it was written
	// kNotice: an event for this user alone that no catch-up brings back
	// (member.removed to the removed user): sent even before the client
	// subscribed, like kDirect, but never dropped.
	kNotice
)

type item struct {
	kind    itemKind
	conv    int64
	seq     int64
	payload []byte
	topic   string
	qos     byte
	join    bool // kEvent's: the member.added of the user it is offered to (ofJoin)
	corr    []byte
	at      time.Time // commit time, for end-to-end latency
	writer  int64     // kMsg's: who wrote the entry (chat.Event.Writer)
	after   func()    // kAfter's
}
