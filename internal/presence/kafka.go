package presence

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	chat "github.com/chatd/chatd"
)

// KafkaPublisher carries presence events to the other nodes through the
// chat.events topic, directly (never through the outbox: presence is not
// stored). Messages are keyed "user:<id>" and carry the headers type and
// origin; each node's consumer skips its own origin and hands the rest to
// Tracker.Remote. Writes are asynchronous and best-effort: a failed write
// is logged (once per change of state) and dropped.
type KafkaPublisher struct {
	w       *kafka.Writer
	origin  string
	log     *slog.Logger
	failing atomic.Bool
}

// NewKafkaPublisher writes to topic on brokers, stamping origin (the value
// the node's consumer skips).
func NewKafkaPublisher(brokers []string, topic, origin string, log *slog.Logger) *KafkaPublisher {
	if log == nil {
		log = slog.Default()
	}
	p := &KafkaPublisher{origin: origin, log: log}
	p.w = &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Topic:                  topic,
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireOne,
		Async:                  true,
		BatchTimeout:           5 * time.Millisecond,
		WriteTimeout:           5 * time.Second,
		MaxAttempts:            3,
		AllowAutoTopicCreation: true,
		Completion:             p.completed,
	}
	return p
}

// Publish queues ev for the other nodes; it does not wait for Kafka.
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
	if err := p.w.WriteMessages(context.Background(), msg); err != nil {
		p.completed(nil, err)
	}
}

func (p *KafkaPublisher) completed(_ []kafka.Message, err error) {
	if err != nil {
		if !p.failing.Swap(true) {
			p.log.Warn("presence: publishing to Kafka failed; other nodes miss presence events until it recovers", "err", err)
		}
		return
	}
	if p.failing.Swap(false) {
		p.log.Info("presence: publishing to Kafka again")
	}
}

// Close flushes pending writes and closes the writer.
func (p *KafkaPublisher) Close() error {
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("close presence kafka writer: %w", err)
	}
	return nil
}
