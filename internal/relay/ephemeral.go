package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/promreg"
)

// ephemeralQueue bounds the events of one kind a node holds for Kafka;
// beyond it, events are dropped (and counted): ephemeral events are best
// effort. ephemeralBatch is how many one write takes.
const (
	ephemeralQueue = 4096
	ephemeralBatch = 512
)

// ephemeralTimeout bounds one write, metadata lookup included.
const ephemeralTimeout = 10 * time.Second

// typingFresh is how long a typing indicator may wait for Kafka: a client
// shows one for about 3 s (the web client; the typist's app sends another
// every 2 s while they type), so one that waited longer, behind a write
// Kafka held up, would show the other nodes' clients a typist who may
// have stopped, or sent their message, since. It is dropped instead.
const typingFresh = 3 * time.Second

// EphemeralConfig configures an EphemeralPublisher; Brokers, Origin and
// Kind are required.
type EphemeralConfig struct {
	Brokers []string
	Topic   string // default DefaultTopic
	// Origin is the node's application name ("chatd:<node id>"), stamped
	// on every event as the header its own consumer skips (SkipOrigin).
	Origin string
	// Kind names the events in the logs, the Kafka client id and the
	// metric chat_<kind>_kafka_dropped_total.
	Kind       EphemeralKind
	Logger     *slog.Logger          // default slog.Default()
	Registerer prometheus.Registerer // nil: the metric is not registered
}

// EphemeralKind is a kind of event that is never stored.
type EphemeralKind string

// The kinds of ephemeral events.
const (
	EphemeralPresence EphemeralKind = "presence"
	EphemeralTyping   EphemeralKind = "typing"
)

// droppedCounter is kind's chat_<kind>_kafka_dropped_total; nil for a kind
// it does not know.
func droppedCounter(kind EphemeralKind) prometheus.Counter {
	const help = " not published to Kafka for the other nodes: the queue was full (Kafka down or slow) or the write failed"
	switch kind {
	case EphemeralPresence:
		return promreg.Counter("chat_presence_kafka_dropped_total", "Presence events"+help+".")
	case EphemeralTyping:
		return promreg.Counter("chat_typing_kafka_dropped_total", "Typing indicators"+help+", or the indicator waited for Kafka longer than it is shown.")
	}
	return nil
}

// EphemeralPublisher carries one kind of ephemeral event (presence,
// typing: never stored) to the other nodes through the chat.events topic,
// directly, never through the outbox. Messages carry the headers type and
// origin and the key EphemeralKey gives; each node's consumer skips its
// own origin and hands the rest to its clients.
//
// Publish never waits: it puts the event into a bounded queue, or drops
// it (chat_<kind>_kafka_dropped_total) when the queue is full, as it is
// when Kafka is down or hangs. One goroutine, owned by the publisher,
// encodes the queued events and writes them to Kafka in batches, each
// bounded by ephemeralTimeout; a failed write is logged (once per change
// of state) and its events dropped. Its callers (the presence tracker's
// flush, a client's typing indicator) also serve this node's clients: a
// Kafka that hangs stops none of that, and costs at most the queue.
type EphemeralPublisher struct {
	w *kafka.Writer
	// transport is the writer's own: Close closes its connections, which
	// kafka-go's shared default transport would keep (with a metadata
	// refresh polling the brokers) for as long as the process lives.
	transport *kafka.Transport
	origin    string
	kind      string
	log       *slog.Logger
	failing   atomic.Bool
	done      chan struct{}
	dropped   prometheus.Counter

	mu     sync.RWMutex // Publish (read) against Close (write) of queue
	queue  chan pending
	closed bool
}

// pending is an event waiting for Kafka, with when it was published.
type pending struct {
	ev chat.Event
	at time.Time
}

// NewEphemeralPublisher validates cfg, registers the publisher's metric and
// starts its goroutine.
func NewEphemeralPublisher(cfg EphemeralConfig) (*EphemeralPublisher, error) {
	dropped := droppedCounter(cfg.Kind)
	if len(cfg.Brokers) == 0 || cfg.Origin == "" || dropped == nil {
		return nil, errors.New("ephemeral publisher: Brokers, Origin and a known Kind are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &EphemeralPublisher{origin: cfg.Origin, kind: string(cfg.Kind), log: cfg.Logger,
		queue:   make(chan pending, ephemeralQueue),
		done:    make(chan struct{}),
		dropped: dropped,
	}
	if err := register(cfg.Registerer, p.dropped); err != nil {
		return nil, fmt.Errorf("ephemeral publisher: %w", err)
	}
	p.transport = &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "chatd-" + p.kind}
	p.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        orDefault(cfg.Topic, DefaultTopic),
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireOne,
		BatchSize:    ephemeralBatch,
		BatchTimeout: time.Millisecond,
		WriteTimeout: 5 * time.Second,
		MaxAttempts:  3,
		// The topic is the outbox relay's to create, with its partition
		// count (Config.Partitions): an ephemeral event written first
		// would have the broker create it with its default count, for
		// good. Until it exists, events are dropped like any that fail.
		Transport: p.transport,
	}
	go p.run()
	return p, nil
}

// EphemeralKey is the Kafka key of an ephemeral event: "user:<id>" for
// presence, which belongs to no conversation; for a conversation's event
// (typing) its id as decimal text, the key the outbox relay gives the
// conversation's stored events, so that they share a partition and a
// consumer reads them in one order.
func EphemeralKey(ev chat.Event) []byte {
	if ev.Type == chat.EventPresence {
		return []byte("user:" + strconv.FormatInt(ev.UserID, 10))
	}
	return strconv.AppendInt(nil, ev.ConversationID, 10)
}

// Publish queues ev for the other nodes; it never waits for Kafka, and
// leaves the encoding to the publisher's goroutine.
func (p *EphemeralPublisher) Publish(ev chat.Event) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return
	}
	select {
	case p.queue <- pending{ev: ev, at: time.Now()}:
	default:
		p.dropped.Inc()
		p.failed(fmt.Errorf("the queue of %s events for Kafka is full", p.kind))
	}
}

// queued is how many events wait for Kafka.
func (p *EphemeralPublisher) queued() int { return len(p.queue) }

// run writes the queue to Kafka until Close closes it.
func (p *EphemeralPublisher) run() {
	defer close(p.done)
	batch := make([]kafka.Message, 0, ephemeralBatch)
	for ev := range p.queue {
		batch = p.append(batch[:0], ev)
	more:
		for len(batch) < ephemeralBatch {
			select {
			case ev, ok := <-p.queue:
				if !ok {
					break more
				}
				batch = p.append(batch, ev)
			default:
				break more
			}
		}
		if len(batch) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ephemeralTimeout)
		err := p.w.WriteMessages(ctx, batch...)
		cancel()
		if err != nil {
			p.dropped.Add(float64(len(batch)))
			p.failed(err)
			continue
		}
		if p.failing.Swap(false) {
			p.log.Info(p.kind + ": publishing to Kafka again")
		}
	}
}

// append adds the message of q's event to batch; a typing indicator that
// waited longer than typingFresh, and an event that cannot be encoded
// (logged), are dropped.
func (p *EphemeralPublisher) append(batch []kafka.Message, q pending) []kafka.Message {
	ev := q.ev
	if ev.Type == chat.EventTyping && time.Since(q.at) > typingFresh {
		p.dropped.Inc()
		return batch
	}
	b, err := chat.EncodeEvent(ev)
	if err != nil {
		p.dropped.Inc()
		p.log.Error(p.kind+": encode event for Kafka", "err", err)
		return batch
	}
	return append(batch, kafka.Message{
		Key:   EphemeralKey(ev),
		Value: b,
		// When it was published: a consumer made after it does not hand
		// it on (Consumer.made). Without it the record's timestamp is 0.
		Time: q.at,
		Headers: []kafka.Header{
			{Key: "type", Value: []byte(ev.Type)},
			{Key: "origin", Value: []byte(p.origin)},
		},
	})
}

func (p *EphemeralPublisher) failed(err error) {
	if !p.failing.Swap(true) {
		p.log.Warn(p.kind+": publishing to Kafka failed; other nodes miss these events until it recovers", "err", writeFailure(err))
	}
}

// Close stops taking events, writes what is queued and closes the writer,
// or gives up when ctx ends first (Kafka down or hanging): the events
// still queued are then lost, as ephemeral events may be.
func (p *EphemeralPublisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.queue)
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		go func() { <-p.done; _ = p.closeWriter() }()
		return fmt.Errorf("close %s kafka writer: %d events not written: %w", p.kind, len(p.queue), ctx.Err())
	}
	if err := p.closeWriter(); err != nil {
		return fmt.Errorf("close %s kafka writer: %w", p.kind, err)
	}
	return nil
}

// closeWriter closes the writer, then its connections.
func (p *EphemeralPublisher) closeWriter() error {
	err := p.w.Close()
	p.transport.CloseIdleConnections()
	return err
}
