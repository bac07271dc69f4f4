package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/retry"
	"github.com/chatd/chatd/internal/tracing"
)

// ConsumerConfig configures a Consumer. Brokers, NodeID and Handler are
// required; zero values take the documented defaults.
type ConsumerConfig struct {
	Brokers []string
	Topic   string // default DefaultTopic
	NodeID  string // this node; the consumer group is "chatd-" + NodeID
	GroupID string // overrides the group derived from NodeID

	// Handler is called for every event, one at a time, from Run's
	// goroutine, in partition order (so in order per conversation). It must
	// tolerate duplicates and events this node committed itself: see the
	// package documentation. Whatever it waits for holds up every event
	// behind it: it must not wait for PostgreSQL.
	Handler func(chat.Event)
	// SkipOrigin drops events whose "origin" header equals it: the
	// events this node committed and already delivered in-process.
	SkipOrigin string
	// Resync is called when Run had to fix where a new group starts
	// itself, because Pin failed (Kafka unreachable when the node
	// started) or was not called: events relayed from the node's start
	// until then never reach Handler, so the node's sessions must re-read
	// PostgreSQL, which holds them. Nil: nobody is told.
	Resync func()

	// StartOffset applies when the group has no committed offset yet:
	// kafka.LastOffset (default) starts at the events produced from now on,
	// kafka.FirstOffset at the oldest retained.
	StartOffset int64
	// CommitInterval batches offset commits (default 1s); offsets are only
	// ever committed for events the handler returned from, and pending
	// commits are flushed when Run returns.
	CommitInterval time.Duration
	BackoffMin     time.Duration // default 100ms
	BackoffMax     time.Duration // default 10s

	Logger     *slog.Logger          // default slog.Default(); the package adds component and the topic, so give it neither
	Registerer prometheus.Registerer // nil: metrics are not registered
	// Tracer continues the trace a record's traceparent header names: a
	// chat.relay.consume span around Handler, which hands the event on
	// with that span's context (chat.Event.Trace). Nil: tracing off, and
	// the header's context is handed on as it came.
	Tracer *tracing.Tracer
}

// Consumer reads chat.events in a consumer group of its own, so every node
// sees every event, and hands the decoded events to a handler.
type Consumer struct {
	cfg     ConsumerConfig
	log     *slog.Logger
	m       *consumerMetrics
	running atomic.Bool
	failing atomic.Bool // logged a failure since the last successful fetch
	pinned  atomic.Bool // Pin succeeded: the group's start is fixed
	echoes  echoes      // failures kafka-go may report again
	// made is when NewConsumer ran, before the node accepted clients:
	// a typing or presence event written before it reached none of
	// them, and is never handed on (live notifications are not
	// replayed), as a node restarted with its NodeID reads its group's
	// backlog.
	made time.Time
}

// NewConsumer validates cfg and registers the consumer's metrics.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("relay consumer: no Kafka brokers configured")
	}
	if cfg.Handler == nil {
		return nil, errors.New("relay consumer: nil handler")
	}
	if cfg.GroupID == "" {
		if cfg.NodeID == "" {
			return nil, errors.New("relay consumer: NodeID or GroupID required")
		}
		cfg.GroupID = "chatd-" + cfg.NodeID
	}
	cfg.Topic = orDefault(cfg.Topic, DefaultTopic)
	cfg.StartOffset = orDefault(cfg.StartOffset, kafka.LastOffset)
	cfg.CommitInterval = orDefault(cfg.CommitInterval, time.Second)
	cfg.BackoffMin = orDefault(cfg.BackoffMin, 100*time.Millisecond)
	cfg.BackoffMax = max(orDefault(cfg.BackoffMax, 10*time.Second), cfg.BackoffMin)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newConsumerMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("relay consumer: %w", err)
	}
	return &Consumer{
		cfg:  cfg,
		log:  cfg.Logger.With("component", "kafka-consumer", "topic", cfg.Topic, "group", cfg.GroupID),
		m:    m,
		made: time.Now(),
	}, nil
}

// Run consumes until ctx is cancelled, then commits what was handled,
// leaves the group and returns nil. It returns an error only when called
// twice. Kafka failures are retried forever (by kafka-go and with backoff
// here), logged on each change of state and counted.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("relay consumer: Run called twice")
	}
	if !c.pinned.Load() && !c.pinLate(ctx) {
		return nil
	}
	rd := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        c.cfg.Brokers,
		GroupID:        c.cfg.GroupID,
		Topic:          c.cfg.Topic,
		StartOffset:    c.cfg.StartOffset,
		CommitInterval: c.cfg.CommitInterval,
		MinBytes:       1,
		MaxBytes:       10 << 20,
		MaxWait:        time.Second,
		ReadBackoffMin: c.cfg.BackoffMin,
		ReadBackoffMax: c.cfg.BackoffMax,
		Dialer: &kafka.Dialer{
			ClientID: "chatd-consumer-" + c.cfg.NodeID,
			Timeout:  10 * time.Second,
			DialFunc: dialNoAutoCreate(10 * time.Second),
		},
		WatchPartitionChanges: true,
		ErrorLogger:           kafkaLogger(c.log, slog.LevelDebug, c.readerFailed),
	})
	defer func() {
		if err := rd.Close(); err != nil {
			c.log.Warn("kafka consumer: close reader", "err", err)
		}
		c.m.lag.Set(0)
		c.log.Info("kafka consumer: stopped")
	}()

	fails := 0
	lag := lagTracker{gauge: c.m.lag, by: map[int]int64{}}
	for {
		msg, err := rd.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fails++
			if !c.echoes.take(err) {
				c.m.errors.WithLabelValues(kindKafka).Inc()
			}
			if c.failing.CompareAndSwap(false, true) {
				c.log.Warn("kafka consumer: fetch failed, retrying with backoff", "err", err)
			}
			retry.Sleep(ctx, retry.Backoff(fails, c.cfg.BackoffMin, c.cfg.BackoffMax))
			continue
		}
		fails = 0
		if c.failing.CompareAndSwap(true, false) {
			c.log.Info("kafka consumer: fetching again")
		}
		lag.set(msg.Partition, msg.HighWaterMark-msg.Offset) // msg too
		c.handle(msg)
		lag.set(msg.Partition, msg.HighWaterMark-msg.Offset-1)
		if err := rd.CommitMessages(ctx, msg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.m.errors.WithLabelValues(kindKafka).Inc()
			c.log.Warn("kafka consumer: commit offset", "partition", msg.Partition, "offset", msg.Offset, "err", err)
		}
	}
}

// lagTracker keeps chat_kafka_consumer_lag_events: the sum, over the
// partitions, of the events not yet handled up to the partition's end as
// the fetch that brought the latest of them saw it.
type lagTracker struct {
	gauge prometheus.Gauge
	by    map[int]int64
	sum   int64
}

func (l *lagTracker) set(partition int, n int64) {
	n = max(n, 0)
	l.sum += n - l.by[partition]
	l.by[partition] = n
	l.gauge.Set(float64(l.sum))
}

// Pin fixes where Run starts in partitions for which the group has no
// committed offset yet (a new group): it commits, as a group with no
// members may, the offset StartOffset names now (the end of each
// partition by default). Call it before the node accepts clients, so that
// every event relayed after a client's session was loaded from PostgreSQL
// is handled. Without it a new group starts wherever the partitions end
// once the group is joined, which Kafka holds back
// (group.initial.rebalance.delay.ms, 3 s by default) and a rebalance can
// delay further: an event of another node relayed meanwhile would never
// reach this node's sessions, which would then wait for the
// conversation's next event to notice the gap. Partitions the group has
// committed offsets for (a node restarted with the same NodeID) are left
// as they are. When Pin fails (or is not called), Run pins before it joins
// the group, retrying until Kafka answers, and calls Resync.
func (c *Consumer) Pin(ctx context.Context) error {
	if _, err := c.pin(ctx); err != nil {
		return err
	}
	c.pinned.Store(true)
	return nil
}

// pinTimeout bounds one attempt of pinLate.
const pinTimeout = 10 * time.Second

// pinLate pins, retrying with backoff, before Run joins the group when
// Pin did not succeed before the node accepted clients; it calls Resync
// if that set where the group starts (what was relayed before is then not
// handled). It reports false when ctx ended first.
func (c *Consumer) pinLate(ctx context.Context) bool {
	for fails := 1; ; fails++ {
		// Each attempt is bounded: a broker that takes the request and
		// never answers must not end the retries.
		actx, cancel := context.WithTimeout(ctx, pinTimeout)
		set, err := c.pin(actx)
		cancel()
		if err == nil {
			if c.failing.CompareAndSwap(true, false) {
				c.log.Info("kafka consumer: pinned where the new group starts")
			}
			if set > 0 && c.cfg.Resync != nil {
				c.cfg.Resync()
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.m.errors.WithLabelValues(kindKafka).Inc()
		if c.failing.CompareAndSwap(false, true) {
			c.log.Warn("kafka consumer: cannot pin where the new group starts, retrying with backoff", "err", err)
		}
		retry.Sleep(ctx, retry.Backoff(fails, c.cfg.BackoffMin, c.cfg.BackoffMax))
	}
}

// pin is Pin; it returns how many partitions' starts it committed.
func (c *Consumer) pin(ctx context.Context) (int, error) {
	transport := &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "chatd-consumer-" + c.cfg.NodeID}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.cfg.Brokers...), Transport: transport}
	topic := c.cfg.Topic
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("pin consumer offsets: metadata: %w", err)
	}
	var parts []int
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("pin consumer offsets: metadata of %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
	}
	if len(parts) == 0 {
		return 0, fmt.Errorf("pin consumer offsets: topic %s has no partitions", topic)
	}
	fetched, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: c.cfg.GroupID, Topics: map[string][]int{topic: parts}})
	if err == nil {
		err = fetched.Error
	}
	committed := map[int]bool{}
	switch {
	case errors.Is(err, kafka.GroupIdNotFound):
		// A group never seen: nothing committed (some brokers say so).
		fetched = &kafka.OffsetFetchResponse{}
	case err != nil:
		return 0, fmt.Errorf("pin consumer offsets: fetch the group's offsets: %w", err)
	}
	for _, p := range fetched.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("pin consumer offsets: fetch the offset of partition %d: %w", p.Partition, p.Error)
		}
		committed[p.Partition] = p.CommittedOffset >= 0
	}
	var want []kafka.OffsetRequest
	for _, p := range parts {
		if !committed[p] {
			want = append(want, kafka.OffsetRequest{Partition: p, Timestamp: c.cfg.StartOffset})
		}
	}
	if len(want) == 0 {
		return 0, nil
	}
	listed, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: want}})
	if err != nil {
		return 0, fmt.Errorf("pin consumer offsets: list offsets: %w", err)
	}
	var commits []kafka.OffsetCommit
	for _, p := range listed.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("pin consumer offsets: list the offset of partition %d: %w", p.Partition, p.Error)
		}
		off := p.LastOffset
		if c.cfg.StartOffset == kafka.FirstOffset {
			off = p.FirstOffset
		}
		commits = append(commits, kafka.OffsetCommit{Partition: p.Partition, Offset: off})
	}
	res, err := client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: c.cfg.GroupID, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{topic: commits}})
	if err != nil {
		return 0, fmt.Errorf("pin consumer offsets: commit: %w", err)
	}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("pin consumer offsets: commit partition %d: %w", p.Partition, p.Error)
		}
	}
	c.log.Info("kafka consumer: new group starts at the partitions' current offsets", "partitions", len(commits))
	return len(commits), nil
}

// readerFailed counts errors kafka-go handles internally (reconnects,
// rebalances) and logs the first of a run of them. kafka-go reports a
// failure of the consumer group (to find the coordinator, join, sync or
// fetch the offsets) up to three times: the group logs it, the reader logs
// the error the group returned ("%v" alone), and when MaxAttempts of them
// came in a row FetchMessage returns it too; each failure counts once.
func (c *Consumer) readerFailed(format string, args []any) {
	if format == "%v" && len(args) == 1 {
		if err, ok := args[0].(error); ok && c.echoes.take(err) {
			return
		}
	} else {
		for _, a := range args {
			if err, ok := a.(error); ok {
				c.echoes.add(err)
			}
		}
	}
	c.m.errors.WithLabelValues(kindKafka).Inc()
	if c.failing.CompareAndSwap(false, true) {
		c.log.Warn("kafka consumer: Kafka unavailable or rebalancing, kafka-go retries (details at debug level)")
	}
}

func (c *Consumer) handle(msg kafka.Message) {
	if c.cfg.SkipOrigin != "" {
		for _, h := range msg.Headers {
			if h.Key == "origin" && string(h.Value) == c.cfg.SkipOrigin {
				return
			}
		}
	}
	ev, err := DecodeEvent(msg)
	if err != nil {
		c.m.errors.WithLabelValues(kindDecode).Inc()
		c.log.Warn("kafka consumer: skipped undecodable message", "partition", msg.Partition, "offset", msg.Offset, "bytes", len(msg.Value), "err", err)
		return
	}
	if ev.Ephemeral() && writtenBefore(msg, c.made) {
		return
	}
	if ev.Trace.Parent != "" && c.cfg.Tracer != nil {
		_, span := c.cfg.Tracer.Start(tracing.Extract(context.Background(), ev.Trace), tracing.SpanRelayConsume,
			trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
				attribute.String("messaging.system", "kafka"), attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.destination.name", msg.Topic), attribute.Int("messaging.destination.partition.id", msg.Partition),
				attribute.Int64("messaging.kafka.offset", msg.Offset), tracing.AttrEventType.String(ev.Type), tracing.AttrEventID.Int64(ev.EventID)))
		if span.IsRecording() {
			ev.Trace = tracing.FromSpanContext(span.SpanContext())
		}
		defer span.End()
	}
	c.cfg.Handler(ev)
	c.m.events.Inc()
}

// writtenBefore reports whether msg's timestamp is before t's
// millisecond (Kafka's resolution: a message written in the same
// millisecond after t is not before it); a message without one
// (timestamp 0: written by a producer that set none) is not.
func writtenBefore(msg kafka.Message, t time.Time) bool {
	ms := msg.Time.UnixMilli()
	return ms > 0 && ms < t.UnixMilli()
}

// DecodeEvent decodes a chat.events message. The event id comes from the
// payload, or from the eventId header when the payload lacks it; the
// trace context (chat.Event.Trace) from the traceparent and tracestate
// headers.
func DecodeEvent(msg kafka.Message) (chat.Event, error) {
	var ev chat.Event
	if err := json.Unmarshal(msg.Value, &ev); err != nil {
		return chat.Event{}, fmt.Errorf("decode event: %w", err)
	}
	if ev.Type == "" {
		return chat.Event{}, errors.New("decode event: no type")
	}
	for _, h := range msg.Headers {
		switch h.Key {
		case "eventId":
			if ev.EventID == 0 {
				if id, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
					ev.EventID = id
				}
			}
		case tracing.HeaderTraceparent:
			ev.Trace.Parent = string(h.Value)
		case tracing.HeaderTracestate:
			ev.Trace.State = string(h.Value)
		}
	}
	return ev, nil
}
