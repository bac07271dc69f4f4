package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// TestASendRefusedForGoodWithNoCallerWaitingIsToldAsAnErrorEvent: a
// message queued offline (Send's context ended: ErrQueued) and recovered
// from SessionDir by the next client is refused for good by chatd. No
// caller waits for its outcome any more, so Events tells it (an error
// event naming the clientMsgId), or the application would show it as
// sending for ever; a refusal a waiting caller got from Send is not told
// twice.
func TestASendRefusedForGoodWithNoCallerWaitingIsToldAsAnErrorEvent(t *testing.T) {
	t.Parallel()
	_, broker, _, _ := sender(t)
	const notMine = 999999                        // no conversation of user 1's: refused for good
	cfg := testConfig(t, "mqtt://127.0.0.1:1", 1) // nothing listens: offline
	cfg.SessionDir = t.TempDir()
	offline, err := client.New(ctxFor(t, 5*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = offline.Send(short, notMine, "typed offline")
	cancel()
	if !errors.Is(err, client.ErrQueued) {
		t.Fatalf("a send with no connection before its context ended returned %v, want ErrQueued", err)
	}
	id := offline.Pending()[0].ClientMsgID
	closeClient(t, offline)

	cfg.Brokers = []string{broker}
	c := connect(t, cfg)
	ev := nextEvent(t, c, client.EventError, 15*time.Second)
	if ev.ClientMsgID != id || ev.ConversationID != notMine || ev.Code == "" {
		t.Fatalf("error event %+v, want one for clientMsgId %s in conversation %d with the refusal's code", ev, id, notMine)
	}
	if p := c.Pending(); len(p) != 0 {
		t.Fatalf("the refused message is still pending: %+v", p)
	}

	_, err = c.Send(ctxFor(t, 10*time.Second), notMine, "sent online")
	var refusal *client.Error
	if !errors.As(err, &refusal) {
		t.Fatalf("a send to a conversation the user is not in returned %v, want chatd's refusal", err)
	}
	if watchEvents(t, c, time.Second, func(ev client.Event) bool { return ev.Type == client.EventError }) {
		t.Fatal("a refusal Send returned was told again as an error event")
	}
}
