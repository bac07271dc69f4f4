package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

func TestKillDuringBatchedLoadKeepsEveryAckedMessageGapless(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills a chatd process")
	}
	url := pgtest.NewDB(t)
	pool := openPool(t, url)
	svc := chat.NewService(newStore(pool), chat.DefaultLimits())
	var convs []int64
	for i := 0; i < 20; i++ {
		c, err := svc.CreateGroup(context.Background(), 1, fmt.Sprint("load ", i), []int64{2, 3, 4, 5, 6, 7, 8})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, c.ID)
	}
	bin := buildChatd(t)
	addr := testkit.FreeAddr(t)
	cmd := startProcess(t, bin, addr, nil, "CHAT_DATABASE_URL="+url, "CHAT_DATA_DIR="+t.TempDir(), "CHAT_LOG_LEVEL=error")
	type ackRec struct {
		conv int64
		seq  string
	}
	var mu sync.Mutex
	acked := map[string]ackRec{}
	var n atomic.Int64
	var wg sync.WaitGroup
	// 8 users x 4 connections: 32 concurrent publishers make batches.
	for u := int64(1); u <= 8; u++ {
		for k := 0; k < 4; k++ {
			c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("load-%d-%d", u, k), Password: testnode.Token(t, u), Clean: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Drop)
			wg.Go(func() {
				for i := 0; ; i++ {
					conv := convs[(int(u)*7+k*3+i)%len(convs)]
					id := newID()
					ack, err := c.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(id, "load"))
					if err != nil || ack.ReasonCode >= 0x80 {
						return // the server died
					}
					mu.Lock()
					acked[id] = ackRec{conv, userProp(ack.Properties.User, "seq")}
					mu.Unlock()
					n.Add(1)
				}
			})
		}
	}
	testkit.WaitFor(t, 30*time.Second, "load to build up", func() bool { return n.Load() > 2000 })
	_ = cmd.Process.Kill() // SIGKILL in the middle of batches
	_ = cmd.Wait()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for id, rec := range acked {
		var seq int64
		if err := pool.QueryRow(context.Background(), "SELECT seq FROM message WHERE conversation_id=$1 AND client_msg_id=$2", rec.conv, id).Scan(&seq); err != nil {
			t.Fatalf("acked message %s (conversation %d, seq %s) is not stored: %v", id, rec.conv, rec.seq, err)
		}
		if fmt.Sprint(seq) != rec.seq {
			t.Fatalf("acked message %s stored with seq %d, acked as %s", id, seq, rec.seq)
		}
	}
	var stored int64
	for _, conv := range convs {
		var last, rows, max int64
		if err := pool.QueryRow(context.Background(), `SELECT c.last_seq, count(m.seq), COALESCE(max(m.seq), 0)
			FROM conversation c LEFT JOIN message m ON m.conversation_id = c.id WHERE c.id = $1 GROUP BY c.last_seq`, conv).Scan(&last, &rows, &max); err != nil {
			t.Fatal(err)
		}
		if last != rows || max != rows {
			t.Fatalf("conversation %d after kill: last_seq %d, %d rows, max seq %d", conv, last, rows, max)
		}
		stored += rows
	}
	t.Logf("%d acknowledged before SIGKILL, all stored with their seq; %d stored in total, gapless", len(acked), stored)
}
