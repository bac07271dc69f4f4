package presence

import (
	"context"
	"encoding/json"
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
)

// publishQueue bounds the presence events a node holds for Kafka; beyond
// it, events are dropped (and counted): presence is best effort, and
// queries read PostgreSQL. publishBatch is how many one write takes.
const (
	publishQueue = 4096
	publishBatch = 512
)

// publishTimeout bounds one write, metadata lookup included.
const publishTimeout = 10 * time.Second

// KafkaPublisher carries presence events to the other nodes through the
// chat.events topic, directly (never through the outbox: presence is not
// stored). Messages are keyed "user:<id>" and carry the headers type and
// origin; each node's consumer skips its own origin and hands the rest to
// Tracker.Remote.
//
// Publish never waits: it puts the event into a bounded queue, or drops
// it (chat_presence_kafka_dropped_total) when the queue is full, as it is
// when Kafka is down or hangs. One goroutine, owned by the publisher,
// writes the queue to Kafka in batches, each bounded by publishTimeout; a
// failed write is logged (once per change of state) and its events
// dropped. The caller is the tracker's flush, which also records
// connections and pushes presence to this node's clients: a Kafka that
// hangs stops none of that, and costs at most the queue.
type KafkaPublisher struct {
	w *kafka.Writer
	// transport is the writer's own: Close closes its connections, which
	// kafka-go's shared default transport would keep (with a metadata
	// refresh polling the brokers) for as long as the process lives.
	transport *kafka.Transport
	origin    string
	log       *slog.Logger
	failing   atomic.Bool
	done      chan struct{}
	dropped   prometheus.Counter

	mu     sync.RWMutex // Publish (read) against Close (write) of queue
	queue  chan kafka.Message
	closed bool
}

// NewKafkaPublisher writes to topic on brokers, stamping origin (the value
// the node's consumer skips), and registers its metric with reg (nil: none).
func NewKafkaPublisher(brokers []string, topic, origin string, log *slog.Logger, reg prometheus.Registerer) *KafkaPublisher {
	if log == nil {
		log = slog.Default()
	}
	p := &KafkaPublisher{origin: origin, log: log,
		queue: make(chan kafka.Message, publishQueue),
		done:  make(chan struct{}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_presence_kafka_dropped_total",
			Help: "Presence events not published to Kafka: the queue was full (Kafka down or slow) or the write failed."}),
	}
	if reg != nil {
		reg.MustRegister(p.dropped)
	}
	p.transport = &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "chatd-presence"}
	p.w = &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Topic:                  topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireOne,
		BatchSize:              publishBatch,
		BatchTimeout:           time.Millisecond,
		WriteTimeout:           5 * time.Second,
		MaxAttempts:            3,
		AllowAutoTopicCreation: true,
		Transport:              p.transport,
	}
	go p.run()
	return p
}

// Publish queues ev for the other nodes; it never waits for Kafka.
func (p *KafkaPublisher) Publish(ev chat.Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		p.log.Error("presence: encode event", "err", err)
		return
	}
	msg := kafka.Message{
		Key:   []byte("user:" + strconv.FormatInt(ev.UserID, 10)),
		Value: b,
		Headers: []kafka.Header{
			{Key: "type", Value: []byte(ev.Type)},
			{Key: "origin", Value: []byte(p.origin)},
		},
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return
	}
	select {
	case p.queue <- msg:
	default:
		p.dropped.Inc()
		p.failed(errors.New("the queue of presence events for Kafka is full"))
	}
}

// queued is how many events wait for Kafka.
func (p *KafkaPublisher) queued() int { return len(p.queue) }

// run writes the queue to Kafka until Close closes it.
func (p *KafkaPublisher) run() {
	defer close(p.done)
	batch := make([]kafka.Message, 0, publishBatch)
	for msg := range p.queue {
		batch = append(batch[:0], msg)
	more:
		for len(batch) < publishBatch {
			select {
			case m, ok := <-p.queue:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		err := p.w.WriteMessages(ctx, batch...)
		cancel()
		if err != nil {
			p.dropped.Add(float64(len(batch)))
			p.failed(err)
			continue
		}
		if p.failing.Swap(false) {
			p.log.Info("presence: publishing to Kafka again")
		}
	}
}

func (p *KafkaPublisher) failed(err error) {
	if !p.failing.Swap(true) {
		p.log.Warn("presence: publishing to Kafka failed; other nodes miss presence events until it recovers", "err", err)
	}
}

// Close stops taking events, writes what is queued and closes the writer,
// or gives up when ctx ends first (Kafka down or hanging): the events
// still queued are then lost, as presence may be.
func (p *KafkaPublisher) Close(ctx context.Context) error {
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
		return fmt.Errorf("close presence kafka writer: %d events not written: %w", len(p.queue), ctx.Err())
	}
	if err := p.closeWriter(); err != nil {
		return fmt.Errorf("close presence kafka writer: %w", err)
	}
	return nil
}

// closeWriter closes the writer, then its connections.
func (p *KafkaPublisher) closeWriter() error {
	err := p.w.Close()
	p.transport.CloseIdleConnections()
	return err
}
