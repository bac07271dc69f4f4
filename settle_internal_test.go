package chat

import (
	"context"
	"testing"
)

// TestACommittedChangeSettlesWithoutAnAllocation: settle runs once per
// committed change; only a refund needs the rate-limit keys.
func TestACommittedChangeSettlesWithoutAnAllocation(t *testing.T) {
	s := NewService(nil, DefaultLimits())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := Change{Kind: KindMessage, ConversationID: 12345, UserID: 67890}
	if n := testing.AllocsPerRun(100, func() { s.settle(ctx, c, false, nil) }); n != 0 {
		t.Errorf("%v allocations to settle a committed change, want 0", n)
	}
}
