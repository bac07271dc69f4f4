package hooks

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the MQTT edge.
type Metrics struct {
	Connects *prometheus.CounterVec // by outcome
	Online   prometheus.Gauge
	// ConnectQueue is the CONNECTs waiting for the node's connect budget.
	ConnectQueue prometheus.Gauge
	Publishes    *prometheus.CounterVec // by kind and outcome
	SendLatency  prometheus.Histogram
	// TakenOver counts the connections closed because a connection on
	// another node took their session over.
	TakenOver prometheus.Counter
	// TokenRevoked counts the connections closed because their user
	// revoked the token or client certificate they were authenticated
	// with (one revocation covers both: the metric keeps its name).
	TokenRevoked prometheus.Counter
}

// connectOutcome labels chat_mqtt_connects_total (operations.md lists
// what each means).
type connectOutcome string

const (
	connectOK               connectOutcome = "ok"
	connectRateLimited      connectOutcome = "rate_limited"
	connectBusy             connectOutcome = "busy"
	connectTooMany          connectOutcome = "too_many_connections"
	connectBadToken         connectOutcome = "bad_token"
	connectUsernameMismatch connectOutcome = "username_mismatch"
	connectTokenRevoked     connectOutcome = "token_revoked"
	connectClientIDTaken    connectOutcome = "client_id_taken"
	connectAuthUnavailable  connectOutcome = "auth_unavailable"
	connectUnavailable      connectOutcome = "unavailable"
	connectClientIDBusy     connectOutcome = "client_id_busy"
	connectWillRefused      connectOutcome = "will_refused"
	connectClientIDInvalid  connectOutcome = "client_id_invalid"
	connectAuthMethod       connectOutcome = "auth_method"
	connectProtocolVersion  connectOutcome = "protocol_version"
	connectMalformed        connectOutcome = "malformed"
	// connectTooManyPending is a connection the broker closed before its
	// CONNECT: its address already held the most connections waiting for
	// theirs (CountTooManyPending).
	connectTooManyPending connectOutcome = "too_many_pending"
)

// connectOutcomes are exported at 0 from the start: a series born at its
// first increment has no earlier sample, so rate() and increase() miss
// that first burst (a node's first storm of refusals would not show).
var connectOutcomes = []connectOutcome{connectOK, connectRateLimited, connectBusy, connectTooMany,
	connectBadToken, connectUsernameMismatch, connectTokenRevoked, connectClientIDTaken,
	connectAuthUnavailable, connectUnavailable, connectClientIDBusy, connectWillRefused,
	connectClientIDInvalid, connectAuthMethod, connectProtocolVersion, connectMalformed, connectTooManyPending}

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Connects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_mqtt_connects_total", Help: "MQTT CONNECTs by outcome."}, []string{"outcome"}),
		Online:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "chat_mqtt_connections", Help: "Authenticated MQTT connections."}),
		ConnectQueue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chat_mqtt_connect_queue",
			Help: "MQTT CONNECTs waiting for their turn in the node's connect budget (connect_budget_rate)."}),
		Publishes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_mqtt_publishes_total", Help: "Client publishes by kind and outcome (error code or ok)."}, []string{"kind", "outcome"}),
		SendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chat_send_seconds", Help: "Send transaction latency as seen by the publish hook (validation, commit).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5}}),
		TakenOver: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_mqtt_taken_over_total",
			Help: "MQTT connections closed (v5: DISCONNECT 0x8E) because a connection on another node took their session over."}),
		TokenRevoked: prometheus.NewCounter(prometheus.CounterOpts{Name: "chat_mqtt_token_revoked_total",
			Help: "MQTT connections closed (v5: DISCONNECT 0x87) because their user revoked the token (or client certificate) they were authenticated with, or the certificate's CA revoked it (mqtts_client_crl)."}),
	}
	for _, o := range connectOutcomes {
		m.Connects.WithLabelValues(string(o))
	}
	if reg != nil {
		reg.MustRegister(m.Connects, m.Online, m.ConnectQueue, m.Publishes, m.SendLatency, m.TakenOver, m.TokenRevoked)
	}
	return m
}
