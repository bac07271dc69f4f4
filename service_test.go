package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

// bucketLimiter is a chat.RateLimiter with plain counters per kind/key.
type bucketLimiter struct {
	tokens map[string]int
	takes  map[chat.RateKind]int
}

func newBucketLimiter() *bucketLimiter {
	return &bucketLimiter{tokens: map[string]int{}, takes: map[chat.RateKind]int{}}
}

func (b *bucketLimiter) Take(_ context.Context, kind chat.RateKind, key string, l chat.RateLimit) chat.RateDecision {
	k := string(kind) + ":" + key
	if _, ok := b.tokens[k]; !ok {
		b.tokens[k] = l.Burst
	}
	b.takes[kind]++
	if b.tokens[k] == 0 {
		return chat.RateDecision{Limit: l.Burst, RetryAfter: 1500 * time.Millisecond, Reset: 3 * time.Second}
	}
	b.tokens[k]--
	return chat.RateDecision{Allowed: true, Limit: l.Burst, Remaining: b.tokens[k]}
}

func (b *bucketLimiter) Refund(_ context.Context, kind chat.RateKind, key string, l chat.RateLimit) {
	k := string(kind) + ":" + key
	b.tokens[k] = min(b.tokens[k]+1, l.Burst)
}

// sendStore answers sends: duplicates for known clientMsgIds, errors on demand.
type sendStore struct {
	chat.Store
	seen  map[string]bool
	err   error
	calls int
}

func (s *sendStore) Send(_ context.Context, req chat.SendRequest) (chat.SendResult, error) {
	s.calls++
	if s.err != nil {
		return chat.SendResult{}, s.err
	}
	dup := s.seen[req.ClientMsgID]
	s.seen[req.ClientMsgID] = true
	return chat.SendResult{Duplicate: dup, Message: chat.Message{ConversationID: req.ConversationID, Seq: int64(s.calls)}}, nil
}

func (s *sendStore) MarkRead(context.Context, int64, int64, int64) (chat.ReadResult, error) {
	return chat.ReadResult{Advanced: true, LastReadSeq: 1}, nil
}

type pendingReceipts struct{ pending bool }

func (p *pendingReceipts) MarkRead(context.Context, int64, int64, int64) (chat.ReadResult, error) {
	return chat.ReadResult{Advanced: true, LastReadSeq: 1}, nil
}
func (p *pendingReceipts) Pending(int64, int64) bool { return p.pending }

func TestSendChargesSenderAndConversationAndRefundsWhatDidNotCount(t *testing.T) {
	ctx := context.Background()
	st := &sendStore{seen: map[string]bool{}}
	lim := newBucketLimiter()
	svc := chat.NewService(st, chat.Limits{})
	svc.Limiter = lim
	svc.Rates = chat.RateLimits{Send: chat.RateLimit{Rate: 1, Burst: 2}, Conv: chat.RateLimit{Rate: 1, Burst: 3}}
	send := func(user int64, id string) error {
		_, err := svc.Send(ctx, chat.SendRequest{ConversationID: 7, SenderID: user, ClientMsgID: id, Body: "x"})
		return err
	}
	first := uuid.NewString()
	if err := send(1, first); err != nil {
		t.Fatal(err)
	}
	// A duplicate resend is refunded, so user 1 still has one token.
	if err := send(1, first); err != nil {
		t.Fatal(err)
	}
	if err := send(1, uuid.NewString()); err != nil {
		t.Fatalf("second new message within the burst: %v", err)
	}
	err := send(1, uuid.NewString())
	if !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("third new message: %v, want rate_limited", err)
	}
	rl := chat.RateLimitOf(err)
	if rl == nil || rl.Kind != chat.RateSend || rl.Limit != 2 || rl.RetryAfter != 1500*time.Millisecond || rl.Reset != 3*time.Second {
		t.Fatalf("rate limit info %+v", rl)
	}
	if !strings.Contains(chat.ErrorMessage(err), "1 messages per second per user (burst 2)") {
		t.Fatalf("message %q", chat.ErrorMessage(err))
	}
	calls := st.calls
	// The conversation's bucket (3) has one token left: user 2 takes it,
	// user 3 is refused by the conversation and keeps its own token.
	if err := send(2, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	if err := send(3, uuid.NewString()); chat.RateLimitOf(err) == nil || chat.RateLimitOf(err).Kind != chat.RateConv {
		t.Fatalf("conversation over its limit: %v", err)
	}
	if lim.tokens["send:3"] != 2 {
		t.Fatalf("user 3 was charged for a send the conversation refused: %d tokens left", lim.tokens["send:3"])
	}
	if st.calls != calls+1 {
		t.Fatal("a refused send reached the store")
	}
	// A send that failed as unavailable is refunded: the client resends it.
	st.err = chat.Unavailable("send", errors.New("down"))
	before := lim.tokens["send:4"]
	_ = send(4, uuid.NewString())
	if lim.tokens["send:4"] != 2 || before != 0 {
		t.Fatalf("unavailable send charged: %d tokens", lim.tokens["send:4"])
	}
}

func TestMarkReadChargesOnlyReceiptsThatCostAWrite(t *testing.T) {
	ctx := context.Background()
	lim := newBucketLimiter()
	rec := &pendingReceipts{}
	svc := chat.NewService(&sendStore{seen: map[string]bool{}}, chat.Limits{})
	svc.Limiter, svc.Receipts = lim, rec
	svc.Rates.Read = chat.RateLimit{Rate: 1, Burst: 1}
	if _, err := svc.MarkRead(ctx, 7, 1, 3); err != nil {
		t.Fatal(err)
	}
	rec.pending = true // merges into a waiting receipt: free
	for range 5 {
		if _, err := svc.MarkRead(ctx, 7, 1, 4); err != nil {
			t.Fatalf("merged receipt refused: %v", err)
		}
	}
	rec.pending = false
	if _, err := svc.MarkRead(ctx, 7, 1, 5); !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("receipt needing a write over the limit: %v", err)
	}
	if lim.takes[chat.RateRead] != 2 {
		t.Fatalf("%d read tokens taken, want 2", lim.takes[chat.RateRead])
	}
	// Without a limiter nothing is limited.
	svc.Limiter = nil
	if _, err := svc.MarkRead(ctx, 7, 1, 5); err != nil {
		t.Fatal(err)
	}
	if err := svc.CheckRate(ctx, chat.RateAPI, "1"); err != nil {
		t.Fatal(err)
	}
}

func TestPresenceNeedsASharedConversation(t *testing.T) {
	svc := chat.NewService(&sendStore{}, chat.Limits{})
	if _, err := svc.Presence(context.Background(), 1, 2); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("without a presence source: %v", err)
	}
	now := time.Now()
	svc.PresenceSource = fakePresence{shared: map[[2]int64]bool{{1, 2}: true}, at: now}
	if p, err := svc.Presence(context.Background(), 1, 2); err != nil || !p.Online || p.UserID != 2 {
		t.Fatalf("shared: %+v %v", p, err)
	}
	if _, err := svc.Presence(context.Background(), 1, 3); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("not shared: %v", err)
	}
	if _, err := svc.Presence(context.Background(), 3, 3); err != nil {
		t.Fatalf("own presence: %v", err)
	}
	if _, err := svc.Presence(context.Background(), 1, 0); !errors.Is(err, chat.ErrInvalid) {
		t.Fatalf("user 0: %v", err)
	}
	ev := chat.PresenceEvent(chat.Presence{UserID: 2, Online: false, LastSeen: &now})
	if ev.Type != chat.EventPresence || ev.UserID != 2 || ev.Online == nil || *ev.Online || ev.LastSeen == nil {
		t.Fatalf("presence event %+v", ev)
	}
}

type fakePresence struct {
	shared map[[2]int64]bool
	at     time.Time
}

func (f fakePresence) Presence(_ context.Context, u int64) (chat.Presence, error) {
	return chat.Presence{UserID: u, Online: true, LastSeen: &f.at}, nil
}
func (f fakePresence) SharesConversation(_ context.Context, a, b int64) (bool, error) {
	return f.shared[[2]int64{a, b}], nil
}
