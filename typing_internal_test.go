package chat

import (
	"strings"
	"testing"
	"time"
)

// TestATypingFloodOfManyConversationsCostsEachIndicatorLittle: the
// per-(user, conversation) throttle remembers every typing indicator of
// the last second, here more than its bound of 100,000 (a flood of typing
// to made-up conversations, which passes the throttle before anything
// else refuses it, or a very busy node). Past that bound an indicator must
// cost about what one below it costs, not a scan of all the throttle
// remembers (100,000 entries, under the lock every typing indicator of
// the node takes).
func TestATypingFloodOfManyConversationsCostsEachIndicatorLittle(t *testing.T) {
	var th typingThrottle
	now := time.Now()
	conv := int64(1)
	start := time.Now()
	const below = 100_001
	for ; conv <= below; conv++ {
		th.allow(7, conv, now) // every pair new: let through
	}
	each := time.Since(start) / below
	const more = 10_000
	// Twenty times an indicator below the bound, and room for a pause
	// of the collector or the machine.
	budget := 20*each*more + 100*time.Millisecond
	start = time.Now()
	for i := 0; i < more; i++ {
		if ok, _ := th.allow(7, conv, now); !ok {
			t.Fatalf("conversation %d's first indicator throttled", conv)
		}
		conv++
		if d := time.Since(start); d > budget {
			t.Fatalf("%d indicators past the throttle's bound took %v (below it one took %v): each scans all it remembers", i+1, d, each)
		}
	}
	t.Logf("%d indicators past the bound in %v; below it one took %v", more, time.Since(start), each)
	// What is older than the interval is still forgotten.
	if ok, _ := th.allow(7, 1, now.Add(TypingInterval+time.Millisecond)); !ok {
		t.Fatal("an indicator a second later is throttled")
	}
	if n := len(th.last); n != 1 {
		t.Fatalf("%d pairs remembered after a second, want only the newest", n)
	}
}

// TestATypingIndicatorHeldBackByARateLimitedOneSaysWhenToRetryFromNow: an
// indicator of the same second as one refused for the rate limit is
// refused as it was, with the retry that much nearer.
func TestATypingIndicatorHeldBackByARateLimitedOneSaysWhenToRetryFromNow(t *testing.T) {
	var th typingThrottle
	now := time.Now()
	th.allow(7, 1, now)
	th.refuse(7, 1, &Error{Code: CodeRateLimited, Message: "rate limited: at most 1 typing events per second (burst 1); retry in 5s", RateLimit: &RateLimitInfo{Kind: RateTyping, RetryAfter: 5 * time.Second, Reset: 5 * time.Second}})
	ok, refused := th.allow(7, 1, now.Add(800*time.Millisecond))
	if ok || ErrorCode(refused) != CodeRateLimited {
		t.Fatalf("held back %v, refused %v; want held back as rate_limited", !ok, refused)
	}
	if rl := RateLimitOf(refused); rl.RetryAfter != 4200*time.Millisecond || rl.Reset != 4200*time.Millisecond {
		t.Fatalf("retry after %v, reset %v; want 4.2s each", rl.RetryAfter, rl.Reset)
	}
	if msg := refused.(*Error).Message; !strings.HasSuffix(msg, "; retry in 4.2s") {
		t.Fatalf("reason %q, want it to say retry in 4.2s", msg)
	}
}
