package relay

import (
	"context"
	"encoding/binary"
	"net"
	"time"
)

// dialNoAutoCreate dials Kafka for the consumer's reader. kafka-go's
// consumer group asks for the topic's partitions (when it joins and, with
// WatchPartitionChanges, every few seconds) with a Metadata request that
// always allows auto creation: a broker with auto.create.topics.enable
// (Kafka's default) would create a chat.events an operator deleted while
// the node runs, with the broker's default partition count, for good,
// where chatd creates it with its own (EnsureTopic) when it starts or
// before the relay's first write. kafka-go has no setting for it, so the
// connection clears the flag in every Metadata request it carries.
//
// It sits below TLS (kafka-go wraps what DialFunc returns) and reads the
// stream as Kafka requests: a Dialer with TLS, or with SASL against a
// broker older than Kafka 1.0 (raw, unframed tokens), must not use it as
// it is.
func dialNoAutoCreate(timeout time.Duration) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &noAutoCreate{Conn: c}, nil
	}
}

// noAutoCreate passes requests on whole, each Metadata request with
// allow_auto_topic_creation false.
type noAutoCreate struct {
	net.Conn
	pending []byte // the start of a request not written whole yet
}

func (c *noAutoCreate) Write(p []byte) (int, error) {
	c.pending = append(c.pending, p...)
	for len(c.pending) >= 4 {
		n := 4 + int(binary.BigEndian.Uint32(c.pending))
		if len(c.pending) < n {
			break
		}
		clearAutoCreate(c.pending[:n])
		if _, err := c.Conn.Write(c.pending[:n]); err != nil {
			return 0, err
		}
		c.pending = c.pending[:copy(c.pending, c.pending[n:])]
	}
	return len(p), nil
}

// metadataKey is the Kafka API key of Metadata requests.
const metadataKey = 3

// clearAutoCreate sets allow_auto_topic_creation false in frame (a whole
// request: size, api key, api version, ...) if it is a Metadata request
// of a version that has the field and no tagged fields (4 to 8): the
// last field of versions 4 to 7, followed by two booleans in version 8.
// Versions 1 to 3 have no field (the broker creates a missing topic
// whatever the client wants); kafka-go's consumer sends 1 or 6.
func clearAutoCreate(frame []byte) {
	if len(frame) < 8 || binary.BigEndian.Uint16(frame[4:]) != metadataKey {
		return
	}
	switch v := binary.BigEndian.Uint16(frame[6:]); {
	case v >= 4 && v <= 7:
		frame[len(frame)-1] = 0
	case v == 8 && len(frame) >= 11:
		frame[len(frame)-3] = 0
	}
}
