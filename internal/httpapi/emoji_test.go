package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestAReactionThatShowsNothingOrRearrangesTextIsRefused: a reaction is
// shown beside its count and the others, so, as a group title or display
// name may not, it may not be invisible (a zero-width joiner or a
// variation selector alone) nor hold a bidirectional override or isolate
// that would rearrange what is shown around it: 400 invalid over HTTP and
// RPC, nothing stored. Emoji sequences (skin tones, ZWJ families,
// variation selectors, keycaps, flags) and plain text stay reactions.
func TestAReactionThatShowsNothingOrRearrangesTextIsRefused(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	m := e.sendMsg(1, g, newID(), "hello")
	path := func(emoji string) string {
		return pathf("/v1/conversations/%d/messages/%d/reactions/%s", g, m.Seq, url.PathEscape(emoji))
	}
	entries := func() int64 {
		var n int64
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM message WHERE conversation_id = $1 AND kind = 'reaction'`, g).Scan(&n); err != nil {
			t.Fatalf("count reactions: %v", err)
		}
		return n
	}
	for _, emoji := range []string{"\u200d", "\ufe0f", "\u200d\ufe0f", "\u200b", "\u2060", "\u202e", "\u202e\U0001F44D", "\U0001F44D\u2066", "\u2069", "\u115f", "\u00ad"} {
		r := e.do(2, "PUT", path(emoji), nil)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" {
			t.Errorf("PUT reaction %+q: %d %s, want 400 invalid", emoji, r.status, truncate(r.body))
		}
		rr := e.rpc(2, "reaction.set", pathf(`{"conversationId":%d,"seq":%d,"clientMsgId":%q,"emoji":%q,"on":true}`, g, m.Seq, newID(), emoji))
		if rr.status != http.StatusBadRequest || rr.code != "invalid" {
			t.Errorf("RPC reaction.set %+q: %s, want 400 invalid", emoji, rr.raw)
		}
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d refused reactions were stored", n)
	}
	// Removing one is not refused (one set before the rule can be taken
	// off): here none is set, so nothing changes.
	var rep struct{ Unchanged bool }
	e.must(http.StatusOK, 2, "DELETE", path("\u200d"), nil, &rep)
	if !rep.Unchanged {
		t.Errorf("removing an absent reaction changed something")
	}
	for _, emoji := range []string{"\U0001F44D", "\U0001F44D\U0001F3FD", "\U0001F3FD", "\u2764\ufe0f", "\u2764",
		"\U0001F468\u200d\U0001F469\u200d\U0001F467", "1\ufe0f\u20e3", "\U0001F1FA\U0001F1F8", "+1", "ok", "\u05e9\u05dc\u05d5\u05dd"} {
		e.must(http.StatusOK, 2, "PUT", path(emoji), nil, nil)
	}
}

// TestANewEmojiOnAMessageCarryingTheMostKindsIsA409TooManyReactions: once a
// message carries chat.MaxReactionKinds distinct emoji, a new one is
// refused over HTTP and RPC with 409 too_many_reactions (a limit of the
// message, not a conflict of clientMsgIds), while an emoji already there
// can still be set.
func TestANewEmojiOnAMessageCarryingTheMostKindsIsA409TooManyReactions(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2, 3)
	m := e.sendMsg(1, g, newID(), "react away")
	path := func(emoji string) string {
		return pathf("/v1/conversations/%d/messages/%d/reactions/%s", g, m.Seq, url.PathEscape(emoji))
	}
	for i := range chat.MaxReactionKinds {
		e.must(http.StatusOK, int64(1+i%2), "PUT", path(pathf("e%d", i)), nil, nil)
	}
	if r := e.do(3, "PUT", path("new"), nil); r.status != http.StatusConflict || r.errorCode() != "too_many_reactions" {
		t.Errorf("PUT a new emoji on a full message: %d %s, want 409 too_many_reactions", r.status, truncate(r.body))
	}
	rr := e.rpc(3, "reaction.set", pathf(`{"conversationId":%d,"seq":%d,"clientMsgId":%q,"emoji":"new","on":true}`, g, m.Seq, newID()))
	if rr.status != http.StatusConflict || rr.code != "too_many_reactions" {
		t.Errorf("RPC reaction.set of a new emoji on a full message: %s, want 409 too_many_reactions", rr.raw)
	}
	var rep struct{ Count int }
	e.must(http.StatusOK, 3, "PUT", path("e0"), nil, &rep)
	if rep.Count != 2 {
		t.Errorf("setting an emoji already on the full message: count %d, want 2", rep.Count)
	}
}
