package delivery

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the delivery layer.
type Metrics struct {
	Sessions       prometheus.Gauge
	Delivered      prometheus.Counter
	Acked          prometheus.Counter
	Replayed       prometheus.Counter
	RecentHits     prometheus.Counter
	SlowDisconnect prometheus.Counter
	Overflows      prometheus.Counter
	Latency        prometheus.Histogram
	CursorErrors   prometheus.Counter
	Strays         prometheus.Counter
	TooLarge       prometheus.Counter
	DirectDropped  prometheus.Counter
	EventsDropped  prometheus.Counter
	Unsettled      prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Sessions:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "chat_sessions_online", Help: "Connected sessions with a delivery pump."}),
		Delivered:      prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_deliveries_total", Help: "PUBLISH packets written to clients on their events topic."}),
		Acked:          prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_acks_total", Help: "PUBACKs received for delivered message.new events."}),
		Replayed:       prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_replayed_total", Help: "message.new events read back from PostgreSQL (catch-up, gap fill)."}),
		RecentHits:     prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_recent_hits_total", Help: "message.new events a catching-up session took from the in-memory recent cache instead of PostgreSQL."}),
		SlowDisconnect: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_slow_consumer_disconnects_total", Help: "Sessions disconnected because they did not keep up."}),
		Overflows:      prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_queue_overflows_total", Help: "Times a session queue or the hub queue overflowed and fell back to PostgreSQL."}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chat_delivery_latency_seconds", Help: "Commit to PUBLISH written, for live message.new.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5}}),
		CursorErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_cursor_flush_errors_total", Help: "Failed delivered-cursor flushes (retried)."}),
		TooLarge:      prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_too_large_total", Help: "Publishes discarded unwritten because they exceed the client's MQTT 5 Maximum Packet Size (its seq is a gap the client fills through history)."}),
		DirectDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_direct_dropped_total", Help: "Error events and RPC replies dropped because their connection left 1,024 of them unwritten (it reads or acknowledges nothing)."}),
		EventsDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_events_dropped_total", Help: "Live notifications (read.updated, delivery.updated, member.*, conversation.*, typing, presence, profile.updated) dropped because the hub's or a session's queue was full: unlike entries they are not caught up (clients refresh the inbox)."}),
		Unsettled:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "chat_delivery_unsettled_conversations", Help: "Conversations whose members the fan-out reads again for each event: a change of their members is committing, or its COMMIT lost its answer and its outcome is not known yet (docs/operations.md)."}),
		Strays:        prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_delivery_strays_total", Help: "Entries routed to a session of a user it does not know to be a member (not delivered; the session re-reads its conversations)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Sessions, m.Delivered, m.Acked, m.Replayed, m.RecentHits, m.SlowDisconnect, m.Overflows, m.Latency, m.CursorErrors, m.Strays, m.TooLarge, m.DirectDropped, m.EventsDropped, m.Unsettled)
	}
	return m
}
