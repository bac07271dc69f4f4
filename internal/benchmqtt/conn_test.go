package benchmqtt

import (
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
)

// BenchmarkPublishAckedAndDelivered is one message of a load run on the
// client's side: a QoS 1 publish, its PUBACK, and its delivery to a
// subscriber, which acknowledges it. Its allocations include the broker's.
func BenchmarkPublishAckedAndDelivered(b *testing.B) {
	addr := mqtttest.PlainBroker(b)
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
