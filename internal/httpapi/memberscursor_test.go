package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestAMembersCursorOfAnotherConversationIsRefusedAsMalformed: a members
// page's nextCursor pages its own conversation only; given for another
// one (where it would start from a position that conversation never had,
// skipping members) it is 400 invalid, as a malformed cursor is, over
// HTTP and RPC. On its own conversation it goes on paging, and so does a
// cursor of the form made before a cursor named its conversation.
func TestAMembersCursorOfAnotherConversationIsRefusedAsMalformed(t *testing.T) {
	e := newEnv(t)
	a := e.group(owner, member, 3, 4)
	b := e.group(owner, member, 3, 4, 5)
	var first chat.MembersPage
	e.must(http.StatusOK, owner, "GET", pathf("/v1/conversations/%d/members?limit=2", a), nil, &first)
	if first.NextCursor == "" || len(first.Members) != 2 {
		t.Fatalf("first page: %+v, want 2 members and a cursor", first)
	}
	malformed := e.do(owner, "GET", pathf("/v1/conversations/%d/members?cursor=bogus", a), nil)
	if malformed.status != http.StatusBadRequest || malformed.errorCode() != "invalid" {
		t.Fatalf("malformed cursor: %d %s, want 400 invalid", malformed.status, truncate(malformed.body))
	}
	other := e.do(owner, "GET", pathf("/v1/conversations/%d/members?cursor=%s", b, first.NextCursor), nil)
	if other.status != malformed.status || other.errorCode() != malformed.errorCode() {
		t.Errorf("conversation %d's cursor on conversation %d: %d %s, want %d %s as a malformed cursor",
			a, b, other.status, truncate(other.body), malformed.status, malformed.errorCode())
	}
	rpc := e.rpc(owner, "members.list", pathf(`{"conversationId":%d,"cursor":%q}`, b, first.NextCursor))
	if rpc.status != http.StatusBadRequest || rpc.code != "invalid" {
		t.Errorf("over RPC on another conversation: %s, want 400 invalid", rpc.raw)
	}

	rest := func(cursor string) []int64 {
		t.Helper()
		var p chat.MembersPage
		e.must(http.StatusOK, owner, "GET", pathf("/v1/conversations/%d/members?limit=10&cursor=%s", a, cursor), nil, &p)
		ids := make([]int64, len(p.Members))
		for i, m := range p.Members {
			ids[i] = m.UserID
		}
		return ids
	}
	want := []int64{3, 4}
	if got := rest(first.NextCursor); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the rest of conversation %d: %v, want %v", a, got, want)
	}
	// The cursor without the conversation (rank:micros:user), as a client
	// may still hold one from before: the same page.
	raw, err := base64.RawURLEncoding.DecodeString(first.NextCursor)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(string(raw), ":")
	if len(fields) < 3 {
		t.Fatalf("cursor %q has %d fields", raw, len(fields))
	}
	old := base64.RawURLEncoding.EncodeToString([]byte(strings.Join(fields[:3], ":")))
	if got := rest(old); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the rest of conversation %d by an older cursor: %v, want %v", a, got, want)
	}
}
