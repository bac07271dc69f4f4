package hooks

import (
	"bytes"
	"net"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"

	chat "github.com/chatd/chatd"
)

// BenchmarkDecodeSend is the first stage of a message's path: the publish
// topic parsed and its payload decoded into a send request (the rest of
// onSend hands it to the domain, which validates it and queues it for
// the batcher). Stages: this, store's
// BenchmarkGroupCommit, delivery's BenchmarkFanOut, BenchmarkPublishEncode.
func BenchmarkDecodeSend(b *testing.B) {
	topic := "chat/v1/conv/67890/msg"
	payload := []byte(`{"clientMsgId":"3f1b8a52-6c1e-4d7a-9a0e-2b6f4c1d9e01","body":"` + string(make100()) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		r := ParseTopic(topic)
		var body chat.SendPayload
		if err := decodeStrict(payload, &body); err != nil {
			b.Fatal(err)
		}
		req := body.Request(r.ConversationID, 1)
		if req.ConversationID != 67890 {
			b.Fatal("bad topic")
		}
	}
}

func make100() []byte {
	b := make([]byte, 100)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// BenchmarkSendAck builds and encodes a send's PUBACK for a v5 client.
func BenchmarkSendAck(b *testing.B) {
	ours, theirs := net.Pipe()
	defer ours.Close()
	defer theirs.Close()
	cl := mqtt.New(nil).NewClient(ours, "bench", "c1", false)
	cl.Properties.ProtocolVersion = 5
	res := chat.SendResult{Message: chat.Message{Seq: 123456}}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		a := chat.Ack{PacketID: 7, Props: sendAckProps(res)}
		buf.Reset()
		if err := encodeAck(&buf, &a, cl); err != nil {
			b.Fatal(err)
		}
	}
}
