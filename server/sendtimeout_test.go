package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// TestAnHTTPSendGivesUpAfterSendTimeoutAsAnMQTTOneDoes: send_timeout is
// "the deadline of one message send, database commit included; a send
// that takes longer fails with unavailable". An MQTT publish and an RPC
// call were held to it, but a send (or an edit) through the HTTP API
// waited for the store's own cap, 10 s, however short send_timeout was:
// with a conversation's row locked, POST .../messages answered after 10 s
// instead of 1.
func TestAnHTTPSendGivesUpAfterSendTimeoutAsAnMQTTOneDoes(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := startNode(t, url, map[string]string{"CHAT_SEND_TIMEOUT": "1s"})
	conv := mustDirect(t, context.Background(), srv, 1, 2)
	mustSendAs(t, srv, conv.ID, 1, "before the lock")
	pool := openPool(t, url)
	release := pgtest.LockConversation(t, context.Background(), pool, conv.ID)
	defer release()
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, fmt.Sprintf("/v1/conversations/%d/messages", conv.ID), map[string]any{"clientMsgId": newID(), "body": "held"}},
		{http.MethodPatch, fmt.Sprintf("/v1/conversations/%d/messages/1", conv.ID), map[string]any{"clientMsgId": newID(), "body": "edited, held"}},
	} {
		start := time.Now()
		r := httpDo(t, srv, 1, c.method, c.path, c.body)
		took := time.Since(start)
		if r.status != http.StatusServiceUnavailable || took > 5*time.Second {
			t.Errorf("%s %s with the conversation locked and send_timeout 1s: %d after %v, want 503 within a few seconds\n%s",
				c.method, c.path, r.status, took.Round(time.Millisecond), r.body)
		}
	}
}
