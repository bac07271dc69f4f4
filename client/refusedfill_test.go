package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestAGapFillOutlastsATokenFuncsRefusedToken: a client with TokenFunc
// does not stop when chatd refuses a token (the next may be good), so a
// gap it is filling is filled once it connects again, and what came
// after the gap waits for it. A history call made while it is refused
// fails with the last attempt's refusal wrapped in its error, which
// matches ErrUnauthorized: the fill took that for a client that stopped
// (Client.Err), gave up, and handed on the message of another
// conversation that came after the gap before the gap's own messages.
func TestAGapFillOutlastsATokenFuncsRefusedToken(t *testing.T) {
	t.Parallel()
	_, broker := nodeOn(t, pgtest.NewDB(t))
	a := connect(t, testConfig(t, broker, 1))
	conv := direct(t, a, 2)
	ctx := ctxFor(t, 60*time.Second)
	g, err := a.CreateGroup(ctx, "after the gap", nil)
	if err != nil {
		t.Fatal(err)
	}
	var good atomic.Bool
	good.Store(true)
	cfg := testConfig(t, broker, 2)
	cfg.Token = ""
	cfg.RequestTimeout = time.Second
	cfg.TokenFunc = func(context.Context) (string, error) {
		if good.Load() {
			return testnode.Token(t, 2), nil
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "2",
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}).SignedString([]byte("not chatd's secret"))
	}
	b := connect(t, cfg)
	if _, err := a.AddMember(ctx, g.ID, 2); err != nil {
		t.Fatal(err)
	}
	sendN(t, a, conv, 1, "first")
	messages(t, b, conv, 1, 10*time.Second)

	// Message 2 is lost on the way, and the fill of the gap before 3
	// gets no reply while b is connected.
	inGroup := make(chan struct{}, 1)
	b.DropEvents(func(p []byte) bool {
		var ev client.Event
		_ = json.Unmarshal(p, &ev)
		if ev.Type == client.EventMessageNew && ev.ConversationID == g.ID {
			select {
			case inGroup <- struct{}{}:
			default:
			}
		}
		return ev.Type == client.EventMessageNew && ev.ConversationID == conv && ev.Seq == 2
	})
	asked := make(chan struct{}, 1)
	b.DropReplies(func([]byte) bool {
		select {
		case asked <- struct{}{}:
		default:
		}
		return true
	})
	sendN(t, a, conv, 2, "more")
	testkit.Receive(t, asked, 15*time.Second, "the gap before 3 was not filled through history within 15s")
	after := sendN(t, a, g.ID, 1, "after the gap")[0]
	testkit.Receive(t, inGroup, 15*time.Second, "the group's message did not reach user 2's client within 15s")

	// Then b's connection ends, and its next tokens are refused: the
	// fill's history calls fail with the refusal wrapped, the one in
	// flight included. Nothing of either conversation may be handed on
	// meanwhile; the fill is still trying once one made after the
	// refusal failed with it (InjectHistoryFaults sees the calls made
	// from then on).
	refused := make(chan error, 1)
	b.InjectHistoryFaults(func(c int64, afterSeq int64) ([]client.Message, error, bool) {
		if good.Load() {
			return nil, nil, false
		}
		hctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := b.History(hctx, c, client.HistoryOptions{AfterSeq: afterSeq, Forward: true, Limit: 1})
		if errors.Is(err, client.ErrUnauthorized) && b.Err() == nil {
			select {
			case refused <- err:
			default:
			}
		}
		return nil, err, true
	})
	good.Store(false)
	b.TerminateConnection()
	deadline := time.After(30 * time.Second)
	for waiting := true; waiting; {
		select {
		case ev := <-b.Events():
			if ev.Type == client.EventMessageNew {
				t.Fatalf("message %d of conversation %d handed on while the gap before 3 is open and the tokens are refused (Err: %v)", ev.Seq, ev.ConversationID, b.Err())
			}
		case err := <-refused:
			t.Logf("a history call of the fill while the tokens are refused: %v", err)
			waiting = false
		case <-deadline:
			t.Fatalf("no history call of the fill failed with the refusal within 30s (Err: %v)", b.Err())
		}
	}
	if err := b.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil: with TokenFunc the client keeps trying", err)
	}

	b.DropReplies(nil)
	good.Store(true)
	var got []int64
	if !watchEvents(t, b, 30*time.Second, func(ev client.Event) bool {
		if ev.Type != client.EventMessageNew {
			return false
		}
		switch ev.ConversationID {
		case conv:
			got = append(got, ev.Seq)
		case g.ID:
			if len(got) < 2 {
				t.Fatalf("the group's message %d, which came after the gap, handed on before the gap's messages (got %v of the direct conversation, want 2 and 3 first)", ev.Seq, got)
			}
			return ev.Seq == after
		}
		return false
	}) {
		t.Fatalf("the gap's messages and then the group's did not come within 30s of a good token (got %v)", got)
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("the direct conversation's messages handed on: %v, want [2 3]", got)
	}
}
