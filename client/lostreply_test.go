package client_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

// loseNextReply makes c lose its next RPC reply together with its
// connection, as when the connection ends before chatd's reply: chatd
// then answers no one (docs/protocol.md "Request/response over MQTT v5").
func loseNextReply(c *client.Client) {
	var lost atomic.Bool
	c.DropReplies(func([]byte) bool {
		if !lost.CompareAndSwap(false, true) {
			return false
		}
		go c.TerminateConnection() // not on paho's reader, which calls this
		return true
	})
}

func TestARequestWhoseConnectionEndedBeforeItsReplyIsAskedAgainOrFailsPromptly(t *testing.T) {
	_, _, a, conv := sender(t)
	connects := a.Stats().Connects

	// A read is asked again on the next connection.
	loseNextReply(a)
	start := time.Now()
	got, err := a.Conversation(ctxFor(t, 10*time.Second), conv)
	if err != nil || got.ID != conv {
		t.Fatalf("conversation after a lost reply: %+v, %v", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the read took %v: it waited for a reply that could not come", d)
	}
	if n := a.Stats().Connects; n <= connects {
		t.Fatalf("connects %d: the reply was lost without its connection", n)
	}

	// A change is not re-sent (it may have run): it fails at once.
	loseNextReply(a)
	start = time.Now()
	_, err = a.CreateGroup(ctxFor(t, 10*time.Second), "lost", []int64{2})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("create group after a lost reply: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the change took %v to fail: it waited for a reply that could not come", d)
	}
}
