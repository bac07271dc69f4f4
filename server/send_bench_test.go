package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// benchNode starts a node for a benchmark with this package's settings.
func benchNode(b *testing.B, opts ...server.Option) *server.Server {
	b.Helper()
	env := testnode.Env(b, pgtest.NewDB(b))
	env["CHAT_JWT_SECRET"] = testnode.Secret
	env["CHAT_PRESENCE_PUSH"] = "false"
	return testnode.Start(b, env, nil, opts...)
}

func benchDial(b *testing.B, addr string, user int64, id string) *mqtttest.Client {
	b.Helper()
	c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: id, Username: fmt.Sprint(user),
		Password: testnode.Token(b, user), Clean: true, ReadBuffer: 1024})
	if err != nil {
		b.Fatalf("connect user %d: %v", user, err)
	}
	b.Cleanup(c.Drop)
	if _, err := c.Subscribe(testnode.EventsTopic(user)); err != nil {
		b.Fatal(err)
	}
	go func() {
		for range c.Publishes { // a recipient reading its deliveries
		}
	}()
	return c
}

// benchSends sends b.N messages one after another, each waiting for its
// PUBACK, into a direct conversation whose recipient is online: the whole
// send path of one message (hook, validation, group commit, fan-out,
// PUBACK, delivery), allocations of the client and the server alike.
func benchSends(b *testing.B, srv *server.Server, opts ...mqtttest.PublishOpts) {
	conv, _, err := srv.Service.OpenDirect(context.Background(), 1, 2)
	if err != nil {
		b.Fatal(err)
	}
	benchDial(b, srv.MQTTAddr(), 2, "bench-recv")
	send := benchDial(b, srv.MQTTAddr(), 1, "bench-send")
	payloads := make([][]byte, b.N+100)
	for i := range payloads {
		payloads[i] = testnode.SendPayload(newID(), "a message of about the size people send, forty-odd bytes")
	}
	for i := range 100 { // warm up: plans cached, buffers grown
		if ack, err := send.Publish(testnode.MsgTopic(conv.ID), 1, payloads[b.N+i], opts...); err != nil || ack.ReasonCode != 0 {
			b.Fatalf("warm-up send: %v %v", ack.ReasonCode, err)
		}
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := range b.N {
		if ack, err := send.Publish(testnode.MsgTopic(conv.ID), 1, payloads[i], opts...); err != nil || ack.ReasonCode != 0 {
			b.Fatalf("send %d: %v %v", i, ack.ReasonCode, err)
		}
	}
	b.StopTimer()
	// The node's CPU (and the clients', in this process; PostgreSQL's is
	// not counted) per send: unlike ns/op, it does not grow while the
	// machine is busy with something else.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	d, err := testkit.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func BenchmarkMQTTSendOneByOne(b *testing.B) {
	benchSends(b, benchNode(b))
}
