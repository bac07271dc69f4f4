package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

// A request refused because the node's request workers are all busy and
// their queue full is an *Error matching ErrRateLimited whose RetryAfter
// says when to ask again (1 s, chatd's PUBACK retryAfter).
func TestARequestRefusedForBusyWorkersCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_LIMIT_API_RATE": "100000", "CHAT_LIMIT_API_BURST": "100000"}), nil)
	conv, err := srv.Service.CreateGroup(ctx, 1, "busy", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every update waits for this lock: the workers (8) and their queue
	// (256) fill up.
	pgtest.LockConversation(t, ctx, srv.Pool, conv.ID)
	c := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	calls, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	refused := make(chan *client.Error, 1)
	var wg sync.WaitGroup
	title := "again"
	for range 300 {
		wg.Go(func() {
			_, err := c.UpdateGroup(calls, conv.ID, client.GroupUpdate{Title: &title})
			var e *client.Error
			if errors.As(err, &e) && errors.Is(err, client.ErrRateLimited) {
				select {
				case refused <- e:
				default:
				}
			}
		})
	}
	var e *client.Error
	select {
	case e = <-refused:
	case <-calls.Done():
		t.Fatal("300 requests waiting for a lock, none refused")
	}
	cancel()
	wg.Wait()
	if e.Reason != 0x97 || e.RetryAfter != time.Second {
		t.Fatalf("refused request: %+v, want reason 0x97 with RetryAfter 1s", e)
	}
}
