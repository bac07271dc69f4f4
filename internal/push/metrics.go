package push

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

type metrics struct {
	leader         prometheus.Gauge
	queue          prometheus.Gauge
	decided        prometheus.Counter
	removes        prometheus.Counter
	updates        prometheus.Counter
	overflow       prometheus.Counter
	devicesDeleted prometheus.Counter
	sent           *prometheus.CounterVec
	skipped        *prometheus.CounterVec
	errors         *prometheus.CounterVec
	latency        prometheus.Histogram
	decideSeconds  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		leader: promreg.Gauge("chat_push_decider_leader",
			"1 while this node holds the push decider lease."),
		queue: promreg.Gauge("chat_push_queue_length",
			"Claimed pushes waiting in this node's memory for a worker."),
		decided: promreg.Counter("chat_push_decided_total",
			"Pushes decided (new or merged into a waiting one) by this node's decider."),
		removes: promreg.Counter("chat_push_removes_total",
			"Remove pushes decided (new or merged into a waiting one) for recalled messages that devices may show: by the decider, or when a newer notification reaches no device and the one before it still shows them."),
		updates: promreg.Counter("chat_push_updates_total",
			"Silent update pushes decided (new or merged into a waiting one) for edited messages whose text devices may show: by the decider, or when a newer notification reaches no device and the one before it still shows the old text."),
		overflow: promreg.Counter("chat_push_queue_overflow_total",
			"Due pushes left in PostgreSQL because this node's queue was full, counted once a second while it is."),
		devicesDeleted: promreg.Counter("chat_push_devices_deleted_total",
			"Devices deleted because their push service answered 404 or 410 (the webhook: 410)."),
		sent: promreg.CounterVec("chat_push_sent_total",
			"Push attempts per device by platform and result (ok, gone, retry, failed).", "platform", "result"),
		skipped: promreg.CounterVec("chat_push_skipped_total",
			"Claimed pushes not sent, by reason (acked, not_member, no_devices, gave_up, expired, recalled, blocked, muted, not_shown).", "reason"),
		errors: promreg.CounterVec("chat_push_errors_total",
			"Push subsystem failures by kind (db).", "kind"),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chat_push_latency_seconds",
			Help:    "From the commit of a push's newest message to its push service's acceptance.",
			Buckets: []float64{0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 15, 30, 60}}),
		decideSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chat_push_decide_seconds",
			Help:    "Duration of one decider transaction.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	if err := promreg.Register(reg, m.leader, m.queue, m.decided, m.removes, m.updates, m.overflow, m.devicesDeleted,
		m.sent, m.skipped, m.errors, m.latency, m.decideSeconds); err != nil {
		return nil, fmt.Errorf("register push metrics: %w", err)
	}
	return m, nil
}
