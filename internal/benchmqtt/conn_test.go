package benchmqtt

import (
	"log/slog"
	"os"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// startBroker runs a mochi broker on a loopback port.
func startBroker(tb testing.TB) string {
	tb.Helper()
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		tb.Fatal(err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
	if err := srv.AddListener(tcp); err != nil {
		tb.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return tcp.Address()
}

// BenchmarkPublishAckedAndDelivered is one message of a load run on the
// client's side: a QoS 1 publish, its PUBACK, and its delivery to a
// subscriber, which acknowledges it. Its allocations include the broker's.
func BenchmarkPublishAckedAndDelivered(b *testing.B) {
	addr := startBroker(b)
	got := make(chan struct{}, 1)
	sub, _, err := Dial(addr, Options{Version: 5, ClientID: "sub", CleanStart: true, KeepAlive: 60,
		OnPublish: func(packets.Packet) { got <- struct{}{} }})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Disconnect()
	if err := sub.Subscribe([]string{"bench/t"}); err != nil {
		b.Fatal(err)
	}
	pub, _, err := Dial(addr, Options{Version: 5, ClientID: "pub", CleanStart: true, KeepAlive: 60})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Disconnect()
	payload := make([]byte, 150)
	acked := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		pub.Publish("bench/t", 1, payload, func(_ packets.Packet, err error) { acked <- err })
		if err := <-acked; err != nil {
			b.Fatal(err)
		}
		<-got
	}
}
