package hooks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// mochiPublish is how WritePublishes encoded a packet before
// encodePublish: mochi's PublishEncode with the Mods it passed.
func mochiPublish(p chat.Packet, version byte, maxSize uint32, noProblemInfo bool) ([]byte, error) {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: p.QoS},
		TopicName:       p.Topic,
		Payload:         p.Payload,
		PacketID:        p.PacketID,
		ProtocolVersion: version,
	}
	pk.Mods.MaxSize = maxSize
	pk.Mods.DisallowProblemInfo = noProblemInfo
	pk.Mods.AllowResponseInfo = true
	if p.CorrelationData != nil {
		pk.Properties.CorrelationData = p.CorrelationData
	}
	var buf bytes.Buffer
	err := pk.PublishEncode(&buf)
	return buf.Bytes(), err
}

// checkPublishEncode asserts encodePublish appends exactly mochi's bytes
// (or fails with mochi's error, appending nothing) after existing content.
func checkPublishEncode(t *testing.T, p chat.Packet, version byte, maxSize uint32, noProblemInfo bool) {
	t.Helper()
	want, wantErr := mochiPublish(p, version, maxSize, noProblemInfo)
	prefix := []byte("prefix")
	buf := bytes.NewBuffer(append([]byte(nil), prefix...))
	err := encodePublish(buf, &p, version)
	if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
		t.Fatalf("v%d qos %d id %d: error %v, mochi %v", version, p.QoS, p.PacketID, err, wantErr)
	}
	if err != nil {
		want = nil
	}
	got := buf.Bytes()
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("existing buffer content overwritten")
	}
	if got := got[len(prefix):]; !bytes.Equal(got, want) {
		t.Fatalf("v%d qos %d id %d topic %d B payload %d B corr %v (%d B):\n got %x\nwant %x",
			version, p.QoS, p.PacketID, len(p.Topic), len(p.Payload), p.CorrelationData != nil, len(p.CorrelationData),
			head(got), head(want))
	}
}

func head(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

func TestEncodePublishMatchesMochi(t *testing.T) {
	topic := "chat/v1/user/42/conv/7"
	payload := []byte(`{"seq":1,"body":"hi"}`)
	for _, tc := range []struct {
		name string
		p    chat.Packet
	}{
		{"qos0", chat.Packet{Topic: topic, Payload: payload}},
		{"qos1", chat.Packet{Topic: topic, Payload: payload, QoS: 1, PacketID: 1}},
		{"qos1 max id", chat.Packet{Topic: topic, Payload: payload, QoS: 1, PacketID: 65535}},
		{"qos1 no id", chat.Packet{Topic: topic, Payload: payload, QoS: 1}},
		{"qos0 id ignored", chat.Packet{Topic: topic, Payload: payload, PacketID: 9}},
		{"empty", chat.Packet{}},
		{"empty payload", chat.Packet{Topic: topic, Payload: []byte{}, QoS: 1, PacketID: 3}},
		{"corr", chat.Packet{Topic: topic, Payload: payload, QoS: 1, PacketID: 2, CorrelationData: []byte("req-1")}},
		{"corr empty non-nil", chat.Packet{Topic: topic, Payload: payload, QoS: 1, PacketID: 2, CorrelationData: []byte{}}},
		{"corr qos0", chat.Packet{Topic: topic, Payload: payload, CorrelationData: []byte{0, 1, 2}}},
		{"corr 124 (props 127)", chat.Packet{Topic: topic, CorrelationData: bytes.Repeat([]byte{'c'}, 124)}},
		{"corr 125 (props 128)", chat.Packet{Topic: topic, CorrelationData: bytes.Repeat([]byte{'c'}, 125)}},
		{"corr 16380 (props 16383)", chat.Packet{Topic: topic, CorrelationData: bytes.Repeat([]byte{'c'}, 16380)}},
		{"corr 16381 (props 16384)", chat.Packet{Topic: topic, CorrelationData: bytes.Repeat([]byte{'c'}, 16381)}},
		{"corr 65535", chat.Packet{Topic: topic, CorrelationData: bytes.Repeat([]byte{'c'}, 65535)}},
		{"topic 65535", chat.Packet{Topic: strings.Repeat("t", 65535), Payload: payload}},
		{"topic 65536 (prefix wraps like mochi)", chat.Packet{Topic: strings.Repeat("t", 65536), Payload: payload}},
		{"payload 2 MiB", chat.Packet{Topic: topic, Payload: bytes.Repeat([]byte{'p'}, 2<<20), QoS: 1, PacketID: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []byte{3, 4, 5} {
				checkPublishEncode(t, tc.p, v, 0, false)
				checkPublishEncode(t, tc.p, v, 64, true)
			}
		})
	}
}

// TestEncodePublishVarintBoundaries puts the remaining length on both
// sides of every MQTT varint boundary (1/2, 2/3 and 3/4 bytes) in every
// shape of packet WritePublishes sends.
func TestEncodePublishVarintBoundaries(t *testing.T) {
	topic := "chat/v1/user/1/conv/2"
	payload := make([]byte, 2097152+8)
	for _, corr := range [][]byte{nil, {}, []byte("c"), bytes.Repeat([]byte{'c'}, 200)} {
		for _, qos := range []byte{0, 1} {
			for _, v := range []byte{4, 5} {
				p := chat.Packet{Topic: topic, QoS: qos, PacketID: uint16(qos) * 77, CorrelationData: corr}
				// The remaining length without payload, as mochi has it.
				b, err := mochiPublish(p, v, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				overhead, _, err := packets.DecodeLength(bytes.NewReader(b[1:]))
				if err != nil {
					t.Fatal(err)
				}
				for _, boundary := range []int{128, 16384, 2097152} {
					for n := boundary - overhead - 3; n <= boundary-overhead+2; n++ {
						if n < 0 {
							continue
						}
						p.Payload = payload[:n]
						checkPublishEncode(t, p, v, 0, false)
					}
				}
			}
		}
	}
}

func TestEncodePublishAllocs(t *testing.T) {
	p := chat.Packet{Topic: "chat/v1/user/1/conv/2", Payload: make([]byte, 300), QoS: 1, PacketID: 7, CorrelationData: []byte("corr")}
	var buf bytes.Buffer
	buf.Grow(4096)
	if n := testing.AllocsPerRun(100, func() {
		buf.Reset()
		_ = encodePublish(&buf, &p, 5)
	}); n != 0 {
		t.Fatalf("encodePublish allocates %v times per packet", n)
	}
}

// TestWritePublishes runs the encoder through WritePublishes on a mochi
// client: the bytes on the wire are mochi's, and a packet above the
// client's Maximum Packet Size is discarded and marked TooLarge.
func TestWritePublishes(t *testing.T) {
	srv := mqtt.New(nil)
	for _, v := range []byte{4, 5} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			ours, theirs := net.Pipe()
			defer ours.Close()
			defer theirs.Close()
			cl := srv.NewClient(ours, "test", "c1", false)
			cl.Properties.ProtocolVersion = v
			ps := []chat.Packet{
				{Topic: "a/b", Payload: []byte("one"), QoS: 1, PacketID: 1, CorrelationData: []byte("x")},
				{Topic: "a/c", Payload: bytes.Repeat([]byte{'2'}, 200)},
				{Topic: "a/d", Payload: []byte{}, QoS: 1, PacketID: 2, CorrelationData: []byte{}},
			}
			var want []byte
			for _, p := range ps {
				b, err := mochiPublish(p, v, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, b...)
			}
			got := make(chan []byte, 1)
			go func() {
				b := make([]byte, len(want))
				_, _ = io.ReadFull(theirs, b)
				got <- b
			}()
			if err := (&mqttConn{cl: cl}).Write(nil, ps); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("wire bytes\n got %x\nwant %x", b, want)
			}

			// Above the client's Maximum Packet Size: the 200-byte one is
			// discarded and marked, the others are written.
			cl.Properties.Props.MaximumPacketSize = 100
			for i := range ps {
				ps[i].TooLarge = false
			}
			want = want[:0]
			for _, p := range []chat.Packet{ps[0], ps[2]} {
				b, err := mochiPublish(p, v, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, b...)
			}
			go func() {
				b := make([]byte, len(want))
				_, _ = io.ReadFull(theirs, b)
				got <- b
			}()
			if err := (&mqttConn{cl: cl}).Write(nil, ps); err != nil {
				t.Fatalf("packet above Maximum Packet Size: %v", err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("with a 200-byte packet above the limit: wire bytes\n got %x\nwant %x", b, want)
			}
			if ps[0].TooLarge || !ps[1].TooLarge || ps[2].TooLarge {
				t.Fatalf("marked too large: %v %v %v, want only the second", ps[0].TooLarge, ps[1].TooLarge, ps[2].TooLarge)
			}
			if err := (&mqttConn{cl: cl}).Write(nil, []chat.Packet{{Topic: "a", QoS: 1}}); !errors.Is(err, packets.ErrProtocolViolationNoPacketID) {
				t.Fatalf("QoS 1 without packet id: error %v", err)
			}
		})
	}
}

func FuzzPublishEncode(f *testing.F) {
	type seed struct {
		topic         string
		payload       []byte
		packetID      uint16
		qos           byte
		version       byte
		corr          []byte
		hasCorr       bool
		maxSize       uint32
		noProblemInfo bool
	}
	for _, s := range []seed{
		{"chat/v1/user/1/conv/2", []byte(`{"seq":1}`), 0, 0, 4, nil, false, 0, false},
		{"chat/v1/user/1/conv/2", []byte(`{"seq":1}`), 1, 1, 4, nil, false, 0, false},
		{"chat/v1/user/1/conv/2", []byte(`{"seq":1}`), 65535, 1, 5, nil, false, 0, false},
		{"chat/v1/user/1/rpc/x", []byte(`{"ok":true}`), 9, 1, 5, []byte("req-1"), true, 0, false},
		{"chat/v1/user/1/rpc/x", []byte(`{"ok":true}`), 9, 1, 5, nil, true, 0, false}, // empty, non-nil
		{"chat/v1/user/1/rpc/x", nil, 0, 0, 5, []byte{0}, true, 1 << 20, true},
		{"", nil, 0, 0, 5, nil, false, 0, false},
		{"a", nil, 0, 1, 5, nil, false, 0, false}, // no packet id
		{"a", nil, 3, 2, 3, nil, false, 0, false},
		{"a", nil, 3, 0, 0, nil, false, 0, false},
		{"t", make([]byte, 122), 0, 0, 4, nil, false, 0, false},               // remaining 125
		{"t", make([]byte, 124), 0, 0, 4, nil, false, 0, false},               // remaining 127
		{"t", make([]byte, 125), 0, 0, 4, nil, false, 0, false},               // remaining 128
		{"t", make([]byte, 16379), 1, 1, 4, nil, false, 0, false},             // remaining 16384
		{"t", make([]byte, 16378), 1, 1, 4, nil, false, 0, false},             // remaining 16383
		{"t", make([]byte, 16373), 1, 1, 5, []byte("x"), true, 0, false},      // remaining 16383
		{"t", nil, 0, 0, 5, bytes.Repeat([]byte{'c'}, 124), true, 0, false},   // props 127
		{"t", nil, 0, 0, 5, bytes.Repeat([]byte{'c'}, 125), true, 0, false},   // props 128
		{"t", nil, 0, 0, 5, bytes.Repeat([]byte{'c'}, 16380), true, 0, false}, // props 16383
		{"t", nil, 0, 0, 5, bytes.Repeat([]byte{'c'}, 16381), true, 0, false}, // props 16384
		{strings.Repeat("t", 127), make([]byte, 16384), 1, 1, 5, nil, true, 0, false},
		{strings.Repeat("t", 128), make([]byte, 16383), 1, 1, 5, []byte("c"), true, 0, false},
	} {
		f.Add(s.topic, s.payload, s.packetID, s.qos, s.version, s.corr, s.hasCorr, s.maxSize, s.noProblemInfo)
	}
	f.Fuzz(func(t *testing.T, topic string, payload []byte, packetID uint16, qos, version byte, corr []byte, hasCorr bool, maxSize uint32, noProblemInfo bool) {
		p := chat.Packet{Topic: topic, Payload: payload, QoS: qos, PacketID: packetID}
		if hasCorr {
			p.CorrelationData = corr
			if p.CorrelationData == nil {
				p.CorrelationData = []byte{}
			}
		}
		checkPublishEncode(t, p, version, maxSize, noProblemInfo)
	})
}

func BenchmarkPublishEncode(b *testing.B) {
	p := chat.Packet{Topic: "chat/v1/user/12345/conv/67890", Payload: make([]byte, 300), QoS: 1, PacketID: 7}
	b.Run("mochi", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			pk := packets.Packet{
				FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: p.QoS},
				TopicName:       p.Topic,
				Payload:         p.Payload,
				PacketID:        p.PacketID,
				ProtocolVersion: 5,
			}
			pk.Mods.AllowResponseInfo = true
			_ = pk.PublishEncode(&buf)
		}
	})
	b.Run("chatd", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			_ = encodePublish(&buf, &p, 5)
		}
	})
}
