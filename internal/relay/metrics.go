package relay

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// Error kinds used as the "kind" label of the error counters.
const (
	kindKafka    = "kafka"    // a Kafka request failed
	kindDB       = "db"       // a PostgreSQL query or connection failed
	kindOversize = "oversize" // an outbox row too large for one Kafka request (dropped)
	kindRefused  = "refused"  // an outbox row Kafka refuses for good otherwise (dropped; refusedForGood)
	kindDecode   = "decode"   // a Kafka message that is not a chat.Event (skipped), or an outbox row that cannot be encoded (dropped)
)

type relayMetrics struct {
	lag       prometheus.Gauge
	pending   prometheus.Gauge
	published prometheus.Counter
	errors    *prometheus.CounterVec
	batchSize prometheus.Histogram
	leader    prometheus.Gauge
}

func newRelayMetrics(reg prometheus.Registerer) (*relayMetrics, error) {
	m := &relayMetrics{
		lag: promreg.Gauge("chat_relay_lag_seconds",
			"Age of the oldest unpublished outbox row, as seen by the leading relay (0 on standby nodes)."),
		pending: promreg.Gauge("chat_relay_pending_rows",
			"Outbox rows not yet published to Kafka, as seen by the leading relay (0 on standby nodes); exact up to 10,000, above that the span of their ids."),
		published: promreg.Counter("chat_relay_published_total",
			"Outbox rows published to Kafka and acknowledged by all in-sync replicas."),
		errors: byKind("chat_relay_errors_total",
			"Relay failures by kind: kafka (write failed, retried), db (query or connection failed), oversize (row too large, dropped), refused (row Kafka refuses for good otherwise: a timestamp out of the topic's range, an invalid record; dropped), decode (row that cannot be encoded, dropped)."),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chat_relay_batch_size",
			Help:    "Rows per successful Kafka write.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		leader: promreg.Gauge("chat_relay_leader",
			"1 while this node holds the relay lease and publishes the outbox, else 0."),
	}
	exportZeros(m.errors, kindKafka, kindDB, kindOversize, kindRefused, kindDecode)
	return m, register(reg, m.lag, m.pending, m.published, m.errors, m.batchSize, m.leader)
}

type consumerMetrics struct {
	events prometheus.Counter
	errors *prometheus.CounterVec
	lag    prometheus.Gauge
}

func newConsumerMetrics(reg prometheus.Registerer) (*consumerMetrics, error) {
	m := &consumerMetrics{
		events: promreg.Counter("chat_kafka_consumer_events_total",
			"Events read from Kafka and handed to the handler."),
		errors: byKind("chat_kafka_consumer_errors_total",
			"Consumer failures by kind: kafka (fetch, commit or group error), decode (message skipped)."),
		lag: promreg.Gauge("chat_kafka_consumer_lag_events",
			"Events in Kafka this node's consumer has not handled yet, as of its latest fetch from each partition."),
	}
	exportZeros(m.errors, kindKafka, kindDecode)
	return m, register(reg, m.events, m.errors, m.lag)
}

type prunerMetrics struct {
	pruned prometheus.Counter
	errors prometheus.Counter
}

func newPrunerMetrics(reg prometheus.Registerer) (*prunerMetrics, error) {
	m := &prunerMetrics{
		pruned: promreg.Counter("chat_outbox_pruned_total",
			"Outbox rows deleted by the pruner because they outlived the retention (no relay configured)."),
		errors: promreg.Counter("chat_outbox_pruner_errors_total",
			"Pruner passes that failed."),
	}
	return m, register(reg, m.pruned, m.errors)
}

// byKind is an error counter labelled by kind (the kind* constants).
func byKind(name, help string) *prometheus.CounterVec {
	return promreg.CounterVec(name, help, "kind")
}

// exportZeros creates the kinds' series at 0, so rate() works from the
// start instead of from a kind's first failure.
func exportZeros(v *prometheus.CounterVec, kinds ...string) {
	for _, k := range kinds {
		v.WithLabelValues(k)
	}
}

func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if err := promreg.Register(reg, cs...); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	return nil
}
