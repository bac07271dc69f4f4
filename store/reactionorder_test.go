package store_test

import (
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
)

// A message's reactions in history are in the order a client that was
// online shows them: applying reaction.updated in seq order, an emoji is
// added when it appears (its count goes from 0 to 1) and dropped when its
// count falls to 0. The first setter taking theirs off while others still
// carry it moves nothing, so history must not order by the earliest
// reaction still stored (which is then a later one).
func TestHistoryListsReactionsInTheOrderLiveEventsShowThem(t *testing.T) {
	rec := &publishRecorder{types: []string{chat.EventReactionUpdated}}
	st, _ := newStoreRecording(t, rec)
	g := mustGroup(t, st, 1, 2, 3)
	m := mustSend(t, st, g.ID, 1, "who is in for lunch?")
	for _, c := range []chat.Change{
		react(g.ID, 1, m.Seq, "👍", true),
		react(g.ID, 2, m.Seq, "❤️", true),
		react(g.ID, 3, m.Seq, "👍", true),
		react(g.ID, 1, m.Seq, "👍", false), // 👍 stays first, carried by user 3
		react(g.ID, 2, m.Seq, "🎉", true),
		react(g.ID, 3, m.Seq, "🎉", true),
		react(g.ID, 2, m.Seq, "🎉", false), // 🎉 stays after ❤️
		react(g.ID, 2, m.Seq, "😮", true),
		react(g.ID, 2, m.Seq, "😮", false), // 😮 goes...
		react(g.ID, 1, m.Seq, "😮", true),  // ...and comes back, last
	} {
		mustChange(t, st, c)
	}

	// The order live events give (client.View and the web client fold
	// them so).
	var live []string
	for _, ev := range rec.events() {
		i := slices.Index(live, ev.Emoji)
		switch {
		case i < 0 && *ev.Count > 0:
			live = append(live, ev.Emoji)
		case i >= 0 && *ev.Count <= 0:
			live = slices.Delete(live, i, i+1)
		}
	}
	page := mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 2})
	var history []string
	for _, r := range page[0].Reactions {
		history = append(history, r.Emoji)
	}
	if !slices.Equal(history, live) {
		t.Fatalf("history lists the reactions as %q; live events show them as %q", history, live)
	}
}

// Migration 0054 gives the reactions stored before it the seq at which
// their emoji appeared, read from the reaction entries, so history lists
// them as their live events did.
func TestMigration0054GivesStoredReactionsTheSeqTheirEmojiAppearedAt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := freshPool(t)
	m54 := migrateBefore(t, ctx, pool, 54).SQL
	// 👍 by 1 (seq 2), ❤️ by 2 (3), 👍 by 3 (4), 👍 taken off by 1 (5).
	mustExec(t, ctx, pool, `
		INSERT INTO conversation (id, type) VALUES (1, 'GROUP');
		INSERT INTO message (conversation_id, seq, msg_no, sender_id, client_msg_id, body, created_at, kind, target_seq, emoji, reaction_on, reaction_count)
		VALUES (1, 1, 1, 1, gen_random_uuid(), 'lunch?', now(), 'message', NULL, NULL, NULL, NULL),
		       (1, 2, 1, 1, gen_random_uuid(), '', now(), 'reaction', 1, '👍', true, 1),
		       (1, 3, 1, 2, gen_random_uuid(), '', now(), 'reaction', 1, '❤️', true, 1),
		       (1, 4, 1, 3, gen_random_uuid(), '', now(), 'reaction', 1, '👍', true, 2),
		       (1, 5, 1, 1, gen_random_uuid(), '', now(), 'reaction', 1, '👍', false, 1);
		INSERT INTO reaction (conversation_id, seq, user_id, emoji, created_at)
		VALUES (1, 1, 2, '❤️', now() - interval '2 seconds'), (1, 1, 3, '👍', now() - interval '1 second')`)
	mustExec(t, ctx, pool, m54)
	got := pgtest.QueryOne[string](t, pool, `SELECT string_agg(emoji || '@' || COALESCE(appeared_seq::text, '-'), ' ' ORDER BY emoji) FROM reaction`)
	if want := "❤️@3 👍@2"; got != want {
		t.Errorf("reactions after 0054: %s, want %s", got, want)
	}
}
