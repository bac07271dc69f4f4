package server_test

import (
	"context"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestCursorAndDeliveredFlushIntervalsAreSettings: CHAT_CURSOR_FLUSH and
// CHAT_DELIVERED_FLUSH reach the hub's cursor writer and the receipts'
// delivered writer: an acknowledgement that follows a flush waits for the
// configured interval, not the default one.
func TestCursorAndDeliveredFlushIntervalsAreSettings(t *testing.T) {
	t.Parallel()
	// Both longer than the defaults (5s, 250ms), which would flush sooner.
	const cursorEvery, deliveredEvery = 7 * time.Second, 2500 * time.Millisecond
	ctx := context.Background()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, map[string]string{"CHAT_CURSOR_FLUSH": cursorEvery.String(), "CHAT_DELIVERED_FLUSH": deliveredEvery.String()})
	if srv.Settings.CursorFlush != cursorEvery || srv.Settings.DeliveredFlush != deliveredEvery {
		t.Fatalf("settings: cursor_flush %v, delivered_flush %v", srv.Settings.CursorFlush, srv.Settings.DeliveredFlush)
	}
	conv := mustGroup(t, ctx, srv, 1, "flush", []int64{2})
	phone := rawClient(t, srv.MQTTAddr(), 2, "flush-phone", 5, false)
	marks := func() (cursor, delivered int64) {
		_ = srv.Pool.QueryRow(ctx, `SELECT delivered_seq FROM session_cursor WHERE client_id = 'flush-phone' AND conversation_id = $1`, conv.ID).Scan(&cursor)
		_ = srv.Pool.QueryRow(ctx, `SELECT delivered_seq FROM member_delivery WHERE conversation_id = $1 AND user_id = 2`, conv.ID).Scan(&delivered)
		return
	}
	send := func() int64 {
		t.Helper()
		res, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "m"})
		if err != nil {
			t.Fatal(err)
		}
		collectMessages(t, phone, conv.ID, 1, 15*time.Second)
		return res.Message.Seq
	}

	// Each writer's first flush comes no earlier than this: it needs the
	// acknowledgement of the first message.
	before := time.Now()
	first := send()
	testkit.WaitFor(t, 15*time.Second, "the first acknowledgement flushed", func() bool {
		c, d := marks()
		return c >= first && d >= first
	})
	second := send() // in the next flush of each: at least an interval after the first
	var cursorAt, deliveredAt time.Time
	testkit.WaitFor(t, 30*time.Second, "the second acknowledgement flushed", func() bool {
		c, d := marks()
		if c >= second && cursorAt.IsZero() {
			cursorAt = time.Now()
		}
		if d >= second && deliveredAt.IsZero() {
			deliveredAt = time.Now()
		}
		return !cursorAt.IsZero() && !deliveredAt.IsZero()
	})
	if took := cursorAt.Sub(before); took < cursorEvery {
		t.Errorf("the cursor's second flush came %v after the first message was sent, within cursor_flush %v", took, cursorEvery)
	}
	if took := deliveredAt.Sub(before); took < deliveredEvery {
		t.Errorf("the delivered watermark's second flush came %v after the first message was sent, within delivered_flush %v", took, deliveredEvery)
	}
}
