package store_test

import (
	"fmt"
	"testing"

	chat "github.com/chatd/chatd"
)

// A message carries at most chat.MaxReactionKinds distinct emoji, whoever
// set them: a new one past that is refused with too_many_reactions and
// stores nothing, while members may still add themselves to one that is
// there, and once an emoji's last carrier takes it off a new one fits.
func TestANewEmojiPastTheMessagesKindsIsRefusedAndAnExistingOneStillCounts(t *testing.T) {
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2, 3)
	m := mustSend(t, st, g.ID, 1, "vote with emoji")
	// Two users share the row, so no one reaches their own limit.
	for i := range chat.MaxReactionKinds {
		mustChange(t, st, react(g.ID, int64(1+i%2), m.Seq, fmt.Sprint("e", i), true))
	}

	refused(t, st, pool, "a new emoji past the message's kinds", react(g.ID, 3, m.Seq, "one-too-many", true), chat.CodeTooManyReactions)

	if res := mustChange(t, st, react(g.ID, 3, m.Seq, "e0", true)); res.Unchanged || res.Entry.Count != 2 {
		t.Fatalf("adding to an emoji already on the full message: %+v, want a new entry with count 2", res)
	}
	mustChange(t, st, react(g.ID, 2, m.Seq, "e1", false)) // e1's only carrier: the row has room again
	if res := mustChange(t, st, react(g.ID, 3, m.Seq, "one-more", true)); res.Unchanged || res.Entry.Count != 1 {
		t.Fatalf("a new emoji once another left the message: %+v, want a new entry with count 1", res)
	}
	refused(t, st, pool, "a new emoji on the full message again", react(g.ID, 3, m.Seq, "and-another", true), chat.CodeTooManyReactions)
	if n := queryInt(t, pool, `SELECT count(DISTINCT emoji) FROM reaction WHERE conversation_id = $1 AND seq = $2`, g.ID, m.Seq); n != chat.MaxReactionKinds {
		t.Fatalf("the message carries %d distinct emoji, want %d", n, chat.MaxReactionKinds)
	}
}
