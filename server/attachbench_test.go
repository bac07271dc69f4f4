package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testnode"
)

// BenchmarkAttachments measures upload and download throughput on
// loopback, through the Go client (ticket over MQTT RPC, bytes over HTTP),
// for the local disk store (chatd receives and serves the bytes) and for
// S3 (gofakes3 in memory, in this process: presigned PUT and GET, chatd
// reads each upload once to check and hash it). docs/benchmarks.md has the
// figures:
//
//	go test -run '^$' -bench BenchmarkAttachments -benchtime 20x ./server/
func BenchmarkAttachments(b *testing.B) {
	for _, store := range []string{"local", "s3"} {
		for _, size := range []int{1 << 20, 25<<20 - 64} {
			b.Run(fmt.Sprintf("%s/%dMiB", store, (size+64)>>20), func(b *testing.B) {
				benchAttachments(b, store == "s3", size)
			})
		}
	}
}

func benchAttachments(b *testing.B, s3 bool, size int) {
	n := startAttachNode(b, s3, map[string]string{"CHAT_LIMIT_UPLOAD_RATE": "0", "CHAT_UPLOAD_BYTES_PER_DAY": "0"})
	g, err := n.Service.CreateGroup(context.Background(), 1, "bench", []int64{2})
	if err != nil {
		b.Fatal(err)
	}
	connectAs := func(user int64) *client.Client {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		c, err := client.New(ctx, client.Config{Brokers: []string{"mqtt://" + n.MQTTAddr()}, UserID: user, Token: testnode.Token(b, user),
			HTTPURL: "http://" + n.HTTPAddr(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		if err := c.AwaitConnection(ctx); err != nil {
			b.Fatal(err)
		}
		return c
	}
	up, down := connectAs(1), connectAs(2)
	// A voice note: no image decoding, the bytes alone.
	data := mediatest.WAV((size - 44) / 16)
	_, _ = rand.Read(data[44:])
	ctx := context.Background()
	b.Run("upload", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := up.Upload(ctx, g.ID, "voice.wav", bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	a, err := up.Upload(ctx, g.ID, "voice.wav", bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := up.SendMessage(ctx, g.ID, "", client.SendOptions{Attachments: []client.AttachmentRef{a.Ref()}}); err != nil {
		b.Fatal(err)
	}
	b.Run("download", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			info, err := down.Download(ctx, a.ID, io.Discard)
			if err != nil || info.Written != int64(len(data)) {
				b.Fatalf("download: %+v %v", info, err)
			}
		}
	})
}
