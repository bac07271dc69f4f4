package httpapi_test

import (
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestMembership: the member cap, owner protection against admins, leaving,
// and a removed member losing access at once.
func TestMembership(t *testing.T) {
	e := newEnvWith(t, envConfig{limits: chat.Limits{MaxMembers: 5}})

	// The cap counts the owner: four others fit, five do not.
	r := e.do(1, "POST", "/v1/conversations", map[string]any{"type": "group", "members": []int64{2, 3, 4, 5, 6}})
	if r.status != 409 || r.errorCode() != "member_cap" {
		t.Fatalf("create with 6 members: %d %s", r.status, r.body)
	}
	g := e.group(1, 2, 3, 4, 5)
	add := func(actor, user int64) resp {
		return e.do(actor, "POST", pathf("/v1/conversations/%d/members", g), map[string]int64{"userId": user})
	}
	remove := func(actor, user int64) resp {
		return e.do(actor, "DELETE", pathf("/v1/conversations/%d/members/%d", g, user), nil)
	}
	if r := add(1, 6); r.status != 409 || r.errorCode() != "member_cap" {
		t.Fatalf("add a 6th member: %d %s", r.status, r.body)
	}
	if rr := e.rpc(1, "members.add", pathf(`{"conversationId":%d,"userId":6}`, g)); rr.status != 409 || rr.code != "member_cap" {
		t.Fatalf("rpc add a 6th member: %s", rr.raw)
	}
	// Re-adding someone already in a full group is not a cap violation.
	if r := add(1, 2); r.status != 200 {
		t.Fatalf("re-add member of a full group: %d %s", r.status, r.body)
	}

	// An admin cannot remove the owner, and the owner stays.
	e.promote(g, 2)
	if r := remove(2, 1); r.status != 403 || r.errorCode() != "forbidden" {
		t.Fatalf("admin removes owner: %d %s", r.status, r.body)
	}
	var c chat.Conversation
	e.must(200, 1, "GET", pathf("/v1/conversations/%d", g), nil, &c)
	if len(c.Members) != 5 {
		t.Fatalf("members after the refused removal: %+v", c.Members)
	}
	// A plain member cannot remove anyone else.
	if r := remove(3, 4); r.status != 403 || r.errorCode() != "forbidden" {
		t.Fatalf("member removes member: %d %s", r.status, r.body)
	}

	// The admin removes a member, who loses access at once.
	e.sendMsg(3, g, newID(), "before removal")
	if r := remove(2, 3); r.status != 204 || len(r.body) != 0 || r.header.Get("Content-Type") != "" {
		t.Fatalf("admin removes member: %d %s %v (a 204 has no body, so no Content-Type)", r.status, r.body, r.header)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", pathf("/v1/conversations/%d/messages", g), nil},
		{"GET", pathf("/v1/conversations/%d", g), nil},
		{"POST", pathf("/v1/conversations/%d/messages", g), map[string]string{"clientMsgId": newID(), "body": "x"}},
		{"POST", pathf("/v1/conversations/%d/read", g), map[string]int{"seq": 1}},
		{"GET", pathf("/v1/conversations/%d/messages/1/seen", g), nil},
	} {
		if r := e.do(3, c.method, c.path, c.body); r.status != 403 || r.errorCode() != "not_member" {
			t.Errorf("removed member %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if rr := e.rpc(3, "history", pathf(`{"conversationId":%d}`, g)); rr.status != 403 || rr.code != "not_member" {
		t.Errorf("removed member rpc history: %s", rr.raw)
	}
	var page chat.InboxPage
	e.must(200, 3, "GET", "/v1/inbox", nil, &page)
	if len(page.Conversations) != 0 {
		t.Errorf("removed member's inbox: %+v", page.Conversations)
	}

	// With room again, the cap lets one more in.
	if r := add(2, 6); r.status != 201 {
		t.Fatalf("add after a removal: %d %s", r.status, r.body)
	}

	// Anyone may leave; the owner too is removed only by leaving.
	if r := remove(4, 4); r.status != 204 {
		t.Fatalf("member leaves: %d %s", r.status, r.body)
	}
	if r := e.do(4, "GET", pathf("/v1/conversations/%d", g), nil); r.status != 403 {
		t.Fatalf("after leaving: %d %s", r.status, r.body)
	}
	if rr := e.rpc(5, "members.remove", pathf(`{"conversationId":%d,"userId":5}`, g)); rr.status != 204 || rr.code != "" {
		t.Fatalf("rpc leave: %s", rr.raw)
	}
}

// TestARetriedLeaveAnswersAsTheFirst: the first leave's answer may be lost
// on a weak network; its retry, and a removed member's leave, answer 204
// like it, while someone who never was a member is still not_member.
func TestARetriedLeaveAnswersAsTheFirst(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2, 3)
	leave := func(user int64) resp {
		return e.do(user, "DELETE", pathf("/v1/conversations/%d/members/%d", g, user), nil)
	}
	if r := leave(2); r.status != 204 {
		t.Fatalf("leave: %d %s", r.status, r.body)
	}
	if r := leave(2); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("retried leave: %d %s, want 204 as the first", r.status, r.body)
	}
	if r := e.do(1, "DELETE", pathf("/v1/conversations/%d/members/3", g), nil); r.status != 204 {
		t.Fatalf("owner removes: %d %s", r.status, r.body)
	}
	if r := leave(3); r.status != 204 {
		t.Fatalf("removed member leaves: %d %s", r.status, r.body)
	}
	if r := leave(4); r.status != 403 || r.errorCode() != "not_member" {
		t.Fatalf("never a member leaves: %d %s", r.status, r.body)
	}
}

// lastSeq is the group's last seq as viewer sees it: a change that
// writes a system entry moves it.
func (e *env) lastSeq(viewer, conv int64) int64 {
	e.t.Helper()
	var c chat.Conversation
	e.must(200, viewer, "GET", pathf("/v1/conversations/%d", conv), nil, &c)
	return c.LastSeq
}

// retriedAnswersAsTheFirst makes a change whose first answer is 204
// (first), asks it again over HTTP (first again) and over RPC (method,
// payload), each answered 204 with nothing more, and returns the
// conversation's last seq after the first: what the retries must leave.
func (e *env) retriedAnswersAsTheFirst(viewer, conv int64, what string, first func() resp, method, payload string) int64 {
	e.t.Helper()
	if r := first(); r.status != 204 {
		e.t.Fatalf("%s: %d %s", what, r.status, r.body)
	}
	seq := e.lastSeq(viewer, conv)
	if r := first(); r.status != 204 || len(r.body) != 0 {
		e.t.Fatalf("retried %s: %d %s, want 204 as the first", what, r.status, r.body)
	}
	if rr := e.rpc(viewer, method, payload); rr.status != 204 || rr.code != "" {
		e.t.Fatalf("retried %s over RPC: %s, want 204 as the first", what, rr.raw)
	}
	return seq
}

// TestARetriedRemoveOfAMemberAnswersAsTheFirst: the first removal's answer
// may be lost on a weak network; its retry by the same admin or owner,
// over HTTP or RPC, answers 204 like it and writes nothing. Another admin
// asking to remove the same user learns no more than before (404).
func TestARetriedRemoveOfAMemberAnswersAsTheFirst(t *testing.T) {
	e := newEnv(t)
	const owner, admin, member = 1, 2, 3
	g := e.group(owner, admin, member)
	e.promote(g, admin)
	remove := func(actor, user int64) resp {
		return e.do(actor, "DELETE", pathf("/v1/conversations/%d/members/%d", g, user), nil)
	}
	seq := e.retriedAnswersAsTheFirst(admin, g, "removal", func() resp { return remove(admin, member) },
		"members.remove", pathf(`{"conversationId":%d,"userId":%d}`, g, member))
	if r := remove(owner, member); r.status != 404 || r.errorCode() != "not_found" {
		t.Fatalf("owner removes whom the admin removed: %d %s, want 404", r.status, r.body)
	}
	if got := e.lastSeq(owner, g); got != seq {
		t.Fatalf("last seq after the retries: %d, want %d (nothing written)", got, seq)
	}
}

// TestARetriedOwnershipTransferAnswersAsTheFirst: the previous owner's
// retry of a transfer whose answer was lost answers 204 like the first,
// over HTTP or RPC, and writes nothing; they are an admin now, and any
// other transfer of theirs is still 403 forbidden.
func TestARetriedOwnershipTransferAnswersAsTheFirst(t *testing.T) {
	e := newEnv(t)
	const owner, heir, member = 1, 2, 3
	g := e.group(owner, heir, member)
	transfer := func(actor, user int64) resp {
		return e.do(actor, "POST", pathf("/v1/conversations/%d/owner", g), map[string]int64{"userId": user})
	}
	seq := e.retriedAnswersAsTheFirst(owner, g, "transfer", func() resp { return transfer(owner, heir) },
		"conversation.owner", pathf(`{"conversationId":%d,"userId":%d}`, g, heir))
	if r := transfer(owner, member); r.status != 403 || r.errorCode() != "forbidden" {
		t.Fatalf("previous owner transfers to another: %d %s, want 403 forbidden", r.status, r.body)
	}
	if got := e.lastSeq(owner, g); got != seq {
		t.Fatalf("last seq after the retries: %d, want %d (nothing written)", got, seq)
	}
}

// TestARetriedAddRoleChangeOrRenameAnswersAsTheFirst: an add, a role
// change or a rename asked again after its answer was lost answers with
// the same body (an add 200 where the first was 201), over HTTP and RPC,
// and writes no second system entry.
func TestARetriedAddRoleChangeOrRenameAnswersAsTheFirst(t *testing.T) {
	e := newEnv(t)
	const owner, member = 1, 2
	g := e.group(owner, member)
	type call struct {
		what, method, path string
		body               any
		rpcMethod, payload string
		first              int
	}
	for _, c := range []call{
		{"add", "POST", pathf("/v1/conversations/%d/members", g), map[string]any{"userId": 3, "role": "admin"},
			"members.add", pathf(`{"conversationId":%d,"userId":3,"role":"admin"}`, g), 201},
		{"role", "PUT", pathf("/v1/conversations/%d/members/%d/role", g, member), map[string]string{"role": "admin"},
			"members.role", pathf(`{"conversationId":%d,"userId":%d,"role":"admin"}`, g, member), 200},
		{"rename", "PATCH", pathf("/v1/conversations/%d", g), map[string]any{"title": "trip", "historyVisible": "all"},
			"conversation.update", pathf(`{"conversationId":%d,"title":"trip","historyVisible":"all"}`, g), 200},
	} {
		first := e.do(owner, c.method, c.path, c.body)
		if first.status != c.first {
			t.Fatalf("%s: %d %s", c.what, first.status, first.body)
		}
		seq := e.lastSeq(owner, g)
		if again := e.do(owner, c.method, c.path, c.body); again.status != 200 || string(again.body) != string(first.body) {
			t.Errorf("retried %s: %d %s, want 200 %s", c.what, again.status, again.body, first.body)
		}
		if rr := e.rpc(owner, c.rpcMethod, c.payload); rr.status != 200 {
			t.Errorf("retried %s over RPC: %s, want 200", c.what, rr.raw)
		}
		if got := e.lastSeq(owner, g); got != seq {
			t.Errorf("retried %s: last seq %d, want %d (nothing written)", c.what, got, seq)
		}
	}
}

// TestARetriedGroupCreateWithTheSameKeyMakesOneGroup: a create whose
// answer was lost, sent again with its Idempotency-Key (HTTP) or
// clientMsgId (RPC), answers 200 with the group the first made, the same
// body as the first 201, and makes no second group. The key reused for
// another group is 409; the key in the HTTP body is refused (it goes in
// the header), as is a key that is not a UUID.
func TestARetriedGroupCreateWithTheSameKeyMakesOneGroup(t *testing.T) {
	e := newEnv(t)
	key := newID()
	body := map[string]any{"type": "group", "title": "team", "members": []int64{2, 3}}
	create := func(body any, key string) resp {
		return e.do(1, "POST", "/v1/conversations", body, withHeader("Idempotency-Key", key))
	}
	first := create(body, key)
	if first.status != 201 {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	again := create(body, key)
	if again.status != 200 || string(again.body) != string(first.body) {
		t.Fatalf("retried create: %d %s, want 200 %s", again.status, again.body, first.body)
	}
	rr := e.rpc(1, "conversation.create", pathf(`{"type":"group","title":"team","members":[3,2],"clientMsgId":%q}`, key))
	if rr.status != 200 {
		t.Fatalf("retried create over RPC: %s, want 200", rr.raw)
	}
	var viaRPC chat.Conversation
	decodeInto(t, rr.raw, &viaRPC)
	var c chat.Conversation
	first.decode(t, &c)
	if viaRPC.ID != c.ID {
		t.Fatalf("retried create over RPC answered group %d, want %d", viaRPC.ID, c.ID)
	}
	var inbox chat.InboxPage
	e.must(200, 2, "GET", "/v1/inbox", nil, &inbox)
	if len(inbox.Conversations) != 1 {
		t.Fatalf("a member's inbox after the retries: %d conversations, want 1", len(inbox.Conversations))
	}

	if r := create(map[string]any{"type": "group", "title": "other", "members": []int64{2, 3}}, key); r.status != 409 || r.errorCode() != "conflict" {
		t.Fatalf("the key for another group: %d %s, want 409 conflict", r.status, r.body)
	}
	if r := e.do(1, "POST", "/v1/conversations", map[string]any{"type": "group", "title": "team", "clientMsgId": newID()}); r.status != 400 {
		t.Fatalf("a key in the HTTP body: %d %s, want 400", r.status, r.body)
	}
	if r := create(body, "not-a-uuid"); r.status != 400 || r.errorCode() != "invalid" {
		t.Fatalf("a key that is not a UUID: %d %s, want 400 invalid", r.status, r.body)
	}
	if r := create(body, newID()); r.status != 201 {
		t.Fatalf("create with a new key: %d %s, want 201", r.status, r.body)
	}
}

// TestAnswersKeepMarkupAsItIs: a body of markup comes back over HTTP and
// RPC as it was sent, not HTML-escaped (\u003c is six bytes for one).
func TestAnswersKeepMarkupAsItIs(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	e.sendMsg(1, g, newID(), "<b>fish & chips</b>")
	want := `"body":"<b>fish & chips</b>"`
	if r := e.do(2, "GET", pathf("/v1/conversations/%d/messages", g), nil); r.status != 200 || !strings.Contains(string(r.body), want) {
		t.Errorf("history over HTTP: %d %s, want %s", r.status, r.body, want)
	}
	if r := e.rpc(2, "history", pathf(`{"conversationId":%d}`, g)); !strings.Contains(string(r.raw), want) {
		t.Errorf("history over RPC: %s, want %s", r.raw, want)
	}
}

// TestACallerWithoutTheRightIsRefusedBeforeLearningWhoIsAMember: removing
// someone, changing their role or handing them the group answers 403
// forbidden to a member who may not do it, whether or not the target is
// a member (a 404 first would tell them); a caller who may do it learns
// that the target is not a member (404). Over HTTP and RPC alike.
func TestACallerWithoutTheRightIsRefusedBeforeLearningWhoIsAMember(t *testing.T) {
	e := newEnv(t)
	const owner, admin, member, stranger = 1, 2, 3, 99
	g := e.group(owner, admin, member, 4)
	e.promote(g, admin)
	type try struct {
		what               string
		actor, target      int64
		method, path       string
		body               any
		rpcMethod, payload string
		status             int
		code               string
	}
	remove := func(actor, target int64, status int, code string) try {
		return try{"remove", actor, target, "DELETE", pathf("/v1/conversations/%d/members/%d", g, target), nil,
			"members.remove", pathf(`{"conversationId":%d,"userId":%d}`, g, target), status, code}
	}
	role := func(actor, target int64, status int, code string) try {
		return try{"role", actor, target, "PUT", pathf("/v1/conversations/%d/members/%d/role", g, target), map[string]string{"role": "admin"},
			"members.role", pathf(`{"conversationId":%d,"userId":%d,"role":"admin"}`, g, target), status, code}
	}
	owns := func(actor, target int64, status int, code string) try {
		return try{"owner", actor, target, "POST", pathf("/v1/conversations/%d/owner", g), map[string]int64{"userId": target},
			"conversation.owner", pathf(`{"conversationId":%d,"userId":%d}`, g, target), status, code}
	}
	for _, c := range []try{
		remove(member, stranger, 403, "forbidden"),
		remove(member, 4, 403, "forbidden"),
		remove(admin, stranger, 404, "not_found"),
		remove(owner, stranger, 404, "not_found"),
		role(member, stranger, 403, "forbidden"),
		role(admin, stranger, 403, "forbidden"),
		role(owner, stranger, 404, "not_found"),
		owns(admin, stranger, 403, "forbidden"),
		owns(owner, stranger, 404, "not_found"),
	} {
		if r := e.do(c.actor, c.method, c.path, c.body); r.status != c.status || r.errorCode() != c.code {
			t.Errorf("%s: %d of %d over HTTP: %d %s, want %d %s", c.what, c.actor, c.target, r.status, r.body, c.status, c.code)
		}
		if rr := e.rpc(c.actor, c.rpcMethod, c.payload); rr.status != c.status || rr.code != c.code {
			t.Errorf("%s: %d of %d over RPC: %s, want %d %s", c.what, c.actor, c.target, rr.raw, c.status, c.code)
		}
	}
}

// TestSomeoneWhoBlockedYouCannotBeAddedToAGroupByYou: a user blocked by
// another cannot put them in a group, neither by adding them (HTTP and
// RPC) nor by creating a group with them: 403 blocked, nothing written.
// Anyone else may add them, and the blocker may add the user they blocked.
func TestSomeoneWhoBlockedYouCannotBeAddedToAGroupByYou(t *testing.T) {
	e := newEnv(t)
	const owner, blocked, blocker = 1, 2, 3
	g := e.group(owner, blocked)
	e.promote(g, blocked)
	e.must(204, blocker, "PUT", pathf("/v1/me/blocks/%d", blocked), nil, nil)

	if r := e.do(blocked, "POST", pathf("/v1/conversations/%d/members", g), map[string]int64{"userId": blocker}); r.status != 403 || r.errorCode() != "blocked" {
		t.Errorf("the blocked admin adds the blocker: %d %s, want 403 blocked", r.status, r.body)
	}
	if rr := e.rpc(blocked, "members.add", pathf(`{"conversationId":%d,"userId":%d}`, g, blocker)); rr.status != 403 || rr.code != "blocked" {
		t.Errorf("over RPC: %s, want 403 blocked", rr.raw)
	}
	if r := e.do(blocked, "POST", "/v1/conversations", map[string]any{"type": "group", "title": "t", "members": []int64{owner, blocker}}); r.status != 403 || r.errorCode() != "blocked" {
		t.Errorf("the blocked user creates a group with the blocker: %d %s, want 403 blocked", r.status, r.body)
	}
	var inbox chat.InboxPage
	e.must(200, blocker, "GET", "/v1/inbox", nil, &inbox)
	if len(inbox.Conversations) != 0 {
		t.Errorf("the blocker was put in %d conversations", len(inbox.Conversations))
	}
	// The owner, whom nobody blocked, may add them; the blocker may add
	// the user they blocked.
	e.must(201, owner, "POST", pathf("/v1/conversations/%d/members", g), map[string]int64{"userId": blocker}, nil)
	g2 := e.group(blocker)
	e.must(201, blocker, "POST", pathf("/v1/conversations/%d/members", g2), map[string]int64{"userId": blocked}, nil)
}
