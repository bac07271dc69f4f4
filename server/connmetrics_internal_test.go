package server

import (
	"fmt"
	"runtime"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chatd/chatd/internal/testkit"
)

// Every connection is counted for as long as it is open, so what the count
// keeps per connection is memory an idle connection holds (issue 24: at
// most 32 KiB in all).
func TestConnectionMetricsKeepLittlePerOpenConnection(t *testing.T) {
	h := newConnMetrics(prometheus.NewRegistry())
	const n = 20000
	clients := make([]*mqtt.Client, n)
	for i := range clients {
		clients[i] = &mqtt.Client{ID: fmt.Sprint("c", i)}
		clients[i].Properties.ProtocolVersion = 5
		clients[i].Net.Listener = "tcp"
	}
	base := testkit.LiveHeap()
	for _, cl := range clients {
		h.OnSessionEstablished(cl, packets.Packet{})
		h.OnSessionEstablished(cl, packets.Packet{}) // counted once
	}
	per := (testkit.LiveHeap() - base) / n
	runtime.KeepAlive(clients)
	t.Logf("%d bytes per counted connection", per)
	if got := testutil.ToFloat64(h.open.WithLabelValues("5", "tcp")); got != n {
		t.Fatalf("open connections %v, want %d", got, n)
	}
	if got := testutil.ToFloat64(h.established.WithLabelValues("5", "tcp")); got != n {
		t.Fatalf("established %v, want %d", got, n)
	}
	if per > 64 {
		t.Fatalf("%d bytes kept per counted connection, want at most 64", per)
	}
	for _, cl := range clients {
		h.OnDisconnect(cl, nil, false)
		h.OnDisconnect(cl, nil, false) // uncounted once
	}
	if got := testutil.ToFloat64(h.open.WithLabelValues("5", "tcp")); got != 0 {
		t.Fatalf("open connections %v once all left, want 0", got)
	}
}
