package benchmqtt

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqttwire"
)

func TestEncodersWriteWhatMochiWrites(t *testing.T) {
	for _, version := range []byte{4, 5} {
		for _, qos := range []byte{0, 1} {
			// Payload sizes around the remaining length's 1/2/3-byte limits.
			for _, n := range []int{0, 1, 100, 110, 127, 200, 16300, 16383, 16400, 70000} {
				topic := "chat/v1/conv/1234567/msg"
				payload := bytes.Repeat([]byte{'x'}, n)
				pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, TopicName: topic, Payload: payload, ProtocolVersion: version}
				if qos > 0 {
					pk.PacketID = 0xbeef
				}
				want, err := mqttwire.Encode(pk)
				if err != nil {
					t.Fatal(err)
				}
				if got := appendPublish([]byte("prefix"), version, qos, pk.PacketID, topic, payload); !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
					t.Errorf("v%d qos %d payload %d: PUBLISH %x, mochi %x", version, qos, n, got[6:min(len(got), 40)], want[:min(len(want), 34)])
				}
			}
		}
		for _, id := range []uint16{1, 0x1234, 0xffff} {
			want, err := mqttwire.Encode(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: id, ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			if got := appendPuback(nil, id); !bytes.Equal(got, want) {
				t.Errorf("v%d: PUBACK %x, mochi %x", version, got, want)
			}
		}
	}
}

func TestPacketBufferedOnlyWhenAWholePacketIs(t *testing.T) {
	whole := appendPublish(nil, 5, 1, 7, "t", bytes.Repeat([]byte{'x'}, 200)) // 2-byte length
	for _, tc := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"nothing", nil, false},
		{"one byte", whole[:1], false},
		{"header split in its length", whole[:2], false},
		{"header only", whole[:3], false},
		{"all but the last byte", whole[:len(whole)-1], false},
		{"a whole packet", whole, true},
		{"a whole PUBACK", appendPuback(nil, 3), true},
		{"a whole packet and part of the next", append(append([]byte{}, whole...), whole[:10]...), true},
	} {
		r := bufio.NewReaderSize(strings.NewReader(string(tc.in)), 64*1024)
		if len(tc.in) > 0 {
			_, _ = r.Peek(len(tc.in)) // fill
		}
		if got := packetBuffered(r); got != tc.want {
			t.Errorf("%s: packetBuffered = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPeekPublishDecodesWhatMochiDecodes(t *testing.T) {
	for _, version := range []byte{4, 5} {
		for _, qos := range []byte{0, 1} {
			for _, n := range []int{0, 100, 200, 16400} {
				payload := bytes.Repeat([]byte{'y'}, n)
				raw := appendPublish(nil, version, qos, 0x0102, "chat/v1/user/9/events", payload)
				raw = append(raw, appendPuback(nil, 5)...) // the next packet, partly read along
				r := bufio.NewReaderSize(bytes.NewReader(raw), 64*1024)
				_, _ = r.Peek(1)
				got, size, ok := peekPublish(r, version)
				if !ok || size != len(raw)-4 {
					t.Fatalf("v%d qos %d payload %d: ok %v size %d", version, qos, n, ok, size)
				}
				want, err := mqttwire.Read(bufio.NewReader(bytes.NewReader(raw)), version)
				if err != nil {
					t.Fatal(err)
				}
				if got.FixedHeader != want.FixedHeader || got.TopicName != want.TopicName || got.PacketID != want.PacketID ||
					!bytes.Equal(got.Payload, want.Payload) || got.ProtocolVersion != want.ProtocolVersion {
					t.Errorf("v%d qos %d payload %d: %+v, mochi %+v", version, qos, n, got.FixedHeader, want.FixedHeader)
				}
			}
		}
	}
	withProps, err := mqttwire.Encode(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 3,
		TopicName: "t", Payload: []byte("p"), ProtocolVersion: 5, Properties: packets.Properties{ContentType: "json"}})
	if err != nil {
		t.Fatal(err)
	}
	whole := appendPublish(nil, 5, 1, 7, "t", []byte("payload"))
	for name, raw := range map[string][]byte{
		"v5 properties":  withProps,
		"a PUBACK":       appendPuback(nil, 1),
		"partly arrived": whole[:len(whole)-1],
	} {
		r := bufio.NewReaderSize(bytes.NewReader(raw), 64*1024)
		_, _ = r.Peek(1)
		if _, _, ok := peekPublish(r, 5); ok {
			t.Errorf("%s: peeked; want it left to mqttwire.Read", name)
		}
	}
}
