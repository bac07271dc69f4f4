package server

import (
	"bytes"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/shrink"
)

// connMetrics is a mochi hook counting authenticated MQTT connections by
// protocol version ("3.1.1", "5": the broker refuses MQTT 3.1) and transport (the listener:
// "tcp", "tls", "ws", "wss"). It sees only sessions mochi established, so
// refused connections never count.
type connMetrics struct {
	mqtt.HookBase
	open        *prometheus.GaugeVec
	established *prometheus.CounterVec
	// live holds each counted connection's gauge in a plain map: an entry
	// is a slot in one table (about 40 bytes), where a sync.Map's is a
	// few heap objects (about 160), and this is per connection.
	mu       sync.Mutex
	live     map[*mqtt.Client]prometheus.Gauge
	livePeak int
}

func newConnMetrics(reg prometheus.Registerer) *connMetrics {
	h := &connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chat_mqtt_connections_by_transport",
			Help: "Authenticated MQTT connections open now, by protocol version and transport (tcp, tls, ws, wss)."}, []string{"protocol", "transport"}),
		established: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chat_mqtt_sessions_established_total",
			Help: "Authenticated MQTT connections established, by protocol version and transport."}, []string{"protocol", "transport"}),
		live: map[*mqtt.Client]prometheus.Gauge{},
	}
	reg.MustRegister(h.open, h.established)
	return h
}

func (h *connMetrics) ID() string { return "connection-metrics" }

func (h *connMetrics) Provides(b byte) bool {
	return bytes.Contains([]byte{mqtt.OnSessionEstablished, mqtt.OnDisconnect}, []byte{b})
}

func protocolName(v byte) string {
	switch v {
	case 4:
		return "3.1.1"
	case 5:
		return "5"
	}
	return "unknown"
}

func (h *connMetrics) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	protocol, transport := protocolName(cl.Properties.ProtocolVersion), cl.Net.Listener
	open := h.open.WithLabelValues(protocol, transport)
	h.mu.Lock()
	_, counted := h.live[cl]
	if !counted {
		h.live[cl] = open
		h.live = shrink.Map(h.live, &h.livePeak)
	}
	h.mu.Unlock()
	if counted {
		return
	}
	open.Inc()
	h.established.WithLabelValues(protocol, transport).Inc()
}

func (h *connMetrics) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.mu.Lock()
	open, ok := h.live[cl]
	if ok {
		delete(h.live, cl)
		h.live = shrink.Map(h.live, &h.livePeak)
	}
	h.mu.Unlock()
	if ok {
		open.Dec()
	}
}
