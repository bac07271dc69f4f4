package relay

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds used as the "kind" label of the error counters.
const (
	kindKafka    = "kafka"    // a Kafka request failed
	kindDB       = "db"       // a PostgreSQL query or connection failed
	kindOversize = "oversize" // an outbox row too large for one Kafka request (dropped)
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
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chat_relay_lag_seconds",
			Help: "Age of the oldest unpublished outbox row, as seen by the leading relay (0 on standby nodes).",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chat_relay_pending_rows",
			Help: "Outbox rows not yet published to Kafka, as seen by the leading relay (0 on standby nodes).",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chat_relay_published_total",
			Help: "Outbox rows published to Kafka and acknowledged by all in-sync replicas.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chat_relay_errors_total",
			Help: "Relay failures by kind: kafka (write failed, retried), db (query or connection failed), oversize (row dropped).",
		}, []string{"kind"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chat_relay_batch_size",
			Help:    "Rows per successful Kafka write.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chat_relay_leader",
			Help: "1 while this node holds the relay lease and publishes the outbox, else 0.",
		}),
	}
	for _, k := range []string{kindKafka, kindDB, kindOversize} {
		m.errors.WithLabelValues(k) // export zeros so rate() works from the start
	}
	err := register(reg, m.lag, m.pending, m.published, m.errors, m.batchSize, m.leader)
	return m, err
}

type consumerMetrics struct {
	events prometheus.Counter
	errors *prometheus.CounterVec
}

func newConsumerMetrics(reg prometheus.Registerer) (*consumerMetrics, error) {
	m := &consumerMetrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chat_kafka_consumer_events_total",
			Help: "Events read from Kafka and handed to the handler.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chat_kafka_consumer_errors_total",
			Help: "Consumer failures by kind: kafka (fetch, commit or group error), decode (message skipped).",
		}, []string{"kind"}),
	}
	for _, k := range []string{kindKafka, kindDecode} {
		m.errors.WithLabelValues(k)
	}
	err := register(reg, m.events, m.errors)
	return m, err
}

type prunerMetrics struct {
	pruned prometheus.Counter
	errors prometheus.Counter
}

func newPrunerMetrics(reg prometheus.Registerer) (*prunerMetrics, error) {
	m := &prunerMetrics{
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chat_outbox_pruned_total",
			Help: "Outbox rows deleted by the pruner because they outlived the retention (no relay configured).",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chat_outbox_pruner_errors_total",
			Help: "Pruner passes that failed.",
		}),
	}
	err := register(reg, m.pruned, m.errors)
	return m, err
}

// register registers cs on reg, all or none; a nil reg leaves the metrics
// unregistered (they still count, nobody scrapes them).
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}
