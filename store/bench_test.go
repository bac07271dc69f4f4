package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// BenchmarkGroupCommit is the second stage of a message's path: the domain
// validates a send and the batcher commits it with the others in flight
// (64 at a time, as many connections sending at once), answering each;
// allocations per message include pgx encoding the batch and decoding its
// results, and the committed event handed on.
func BenchmarkGroupCommit(b *testing.B) {
	ctx := context.Background()
	st := store.New(pgtest.NewPool(b), chat.DefaultLimits())
	b.Cleanup(func() { _ = st.Close(ctx) })
	svc := chat.NewService(st, chat.DefaultLimits())
	conv, _, err := svc.OpenDirect(ctx, 1, 2)
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("x", 100)
	ids := make([]string, b.N+64)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		sem <- struct{}{}
		wg.Add(1)
		svc.SubmitSend(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: ids[i], Body: body},
			func(_ chat.SendResult, err error) {
				if err != nil {
					b.Error(err)
				}
				<-sem
				wg.Done()
			})
	}
	wg.Wait()
}
