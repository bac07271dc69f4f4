package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// BenchmarkChangeOneByOne commits b.N messages one after another through
// group commit (a batch of one each): the store's share of a lone send,
// its PostgreSQL driver's allocations included.
func BenchmarkChangeOneByOne(b *testing.B) {
	pool := pgtest.NewPool(b)
	st := store.New(pool, chat.DefaultLimits())
	b.Cleanup(func() { _ = st.Close(context.Background()) })
	ctx := context.Background()
	conv, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: 1, Title: "bench", Members: []int64{2}})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, b.N+100)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	send := func(id string) {
		if _, err := st.Change(ctx, chat.Change{Kind: chat.KindMessage, ConversationID: conv.ID, UserID: 1, ClientMsgID: id, Body: "hello"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids[b.N:] { // warm up: plans cached
		send(id)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		send(ids[i])
	}
}
