package hooks

import (
	"errors"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/delivery"
)

// mqttConn is a mochi client as a delivery.Conn.
type mqttConn struct {
	cl *mqtt.Client
}

func (c *mqttConn) WritePublish(p delivery.Packet) error {
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: p.QoS},
		TopicName:   p.Topic,
		Payload:     p.Payload,
		PacketID:    p.PacketID,
	}
	if p.CorrelationData != nil {
		pk.Properties.CorrelationData = p.CorrelationData
	}
	return c.cl.WritePacket(pk)
}

func (c *mqttConn) Close(reason string) {
	c.cl.Stop(errors.New(reason))
}
