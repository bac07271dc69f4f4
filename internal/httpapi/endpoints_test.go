package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// Users of the fixture.
const (
	owner    int64 = 1
	member   int64 = 2
	outsider int64 = 3
	admin    int64 = 4
)

// fixture is a group g (owner, member, admin promoted by SQL) holding one
// message by the owner, and the direct conversation d of owner and member.
type fixture struct {
	*env
	g, d int64
}

func newFixture(t *testing.T) fixture {
	e := newEnv(t)
	g := e.group(owner, member, admin)
	e.promote(g, admin)
	var d chat.Conversation
	e.must(http.StatusCreated, owner, "POST", pathf("/v1/direct/%d", member), nil, &d)
	e.sendMsg(owner, g, newID(), "hello")
	return fixture{env: e, g: g, d: d.ID}
}

// apiCase is one request made over HTTP, over RPC, or both (a side is
// skipped when its method is empty); both must answer status and code.
type apiCase struct {
	name    string
	user    int64
	method  string // HTTP
	path    string
	body    string // "" = no body
	rpc     string // RPC method
	payload string
	status  int
	code    string // "" on success
}

// TestEndpoints covers every route and RPC method: success, not a member,
// not allowed and bad input, with the exact status and code on both
// transports. Rows run in order; the membership rows build on each other.
func TestEndpoints(t *testing.T) {
	f := newFixture(t)
	g, d := f.g, f.d
	long := strings.Repeat("x", 201)
	big := strings.Repeat("b", chat.DefaultMaxBodyBytes+1)
	const missing = 999999

	cases := []apiCase{
		// conversation.create
		{name: "create/ok", user: owner, method: "POST", path: "/v1/conversations", body: `{"type":"group","title":"t","members":[2,3]}`,
			rpc: "conversation.create", payload: `{"type":"group","title":"t","members":[2,3]}`, status: 201},
		{name: "create/direct type", user: owner, method: "POST", path: "/v1/conversations", body: `{"type":"direct","members":[2]}`,
			rpc: "conversation.create", payload: `{"type":"direct","members":[2]}`, status: 400, code: "invalid"},
		{name: "create/missing type", user: owner, method: "POST", path: "/v1/conversations", body: `{"title":"t"}`,
			rpc: "conversation.create", payload: `{"title":"t"}`, status: 400, code: "invalid"},
		{name: "create/bad member id", user: owner, method: "POST", path: "/v1/conversations", body: `{"type":"group","members":[0]}`,
			rpc: "conversation.create", payload: `{"type":"group","members":[-4]}`, status: 400, code: "invalid"},
		{name: "create/member not a number", user: owner, method: "POST", path: "/v1/conversations", body: `{"type":"group","members":["2"]}`,
			rpc: "conversation.create", payload: `{"type":"group","members":[1.5]}`, status: 400, code: "invalid"},
		{name: "create/title too long", user: owner, method: "POST", path: "/v1/conversations", body: `{"type":"group","title":"` + long + `"}`,
			rpc: "conversation.create", payload: `{"type":"group","title":"` + long + `"}`, status: 400, code: "invalid"},

		// direct.open
		{name: "direct/existing", user: owner, method: "POST", path: pathf("/v1/direct/%d", member),
			rpc: "direct.open", payload: `{"peerId":2}`, status: 200},
		{name: "direct/existing from the peer", user: member, method: "POST", path: pathf("/v1/direct/%d", owner), body: `{}`,
			rpc: "direct.open", payload: `{"peerId":1}`, status: 200},
		{name: "direct/self", user: owner, method: "POST", path: "/v1/direct/1",
			rpc: "direct.open", payload: `{"peerId":1}`, status: 400, code: "invalid"},
		{name: "direct/bad peer", user: owner, method: "POST", path: "/v1/direct/0",
			rpc: "direct.open", payload: `{"peerId":0}`, status: 400, code: "invalid"},
		{name: "direct/body with fields", user: owner, method: "POST", path: "/v1/direct/2", body: `{"peerId":2}`,
			rpc: "direct.open", payload: `{"peerId":2,"x":1}`, status: 400, code: "invalid"},

		// conversation.get
		{name: "get/member", user: member, method: "GET", path: pathf("/v1/conversations/%d", g),
			rpc: "conversation.get", payload: pathf(`{"conversationId":%d}`, g), status: 200},
		{name: "get/outsider", user: outsider, method: "GET", path: pathf("/v1/conversations/%d", g),
			rpc: "conversation.get", payload: pathf(`{"conversationId":%d}`, g), status: 403, code: "not_member"},
		{name: "get/unknown", user: owner, method: "GET", path: pathf("/v1/conversations/%d", missing),
			rpc: "conversation.get", payload: pathf(`{"conversationId":%d}`, missing), status: 404, code: "not_found"},
		{name: "get/bad id", user: owner, method: "GET", path: "/v1/conversations/abc",
			rpc: "conversation.get", payload: `{"conversationId":"abc"}`, status: 400, code: "invalid"},
		{name: "get/missing id", user: owner,
			rpc: "conversation.get", payload: `{}`, status: 400, code: "invalid"},

		// members.add
		{name: "add/owner over http", user: owner, method: "POST", path: pathf("/v1/conversations/%d/members", g), body: `{"userId":5}`, status: 201},
		{name: "add/owner over rpc", user: owner, rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":6}`, g), status: 201},
		{name: "add/admin over http", user: admin, method: "POST", path: pathf("/v1/conversations/%d/members", g), body: `{"userId":7}`, status: 201},
		{name: "add/admin over rpc", user: admin, rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":8}`, g), status: 201},
		{name: "add/already a member", user: owner, method: "POST", path: pathf("/v1/conversations/%d/members", g), body: `{"userId":2}`,
			rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":2}`, g), status: 200},
		{name: "add/by plain member", user: member, method: "POST", path: pathf("/v1/conversations/%d/members", g), body: `{"userId":9}`,
			rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":9}`, g), status: 403, code: "forbidden"},
		{name: "add/by outsider", user: outsider, method: "POST", path: pathf("/v1/conversations/%d/members", g), body: `{"userId":9}`,
			rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":9}`, g), status: 403, code: "not_member"},
		{name: "add/to direct", user: owner, method: "POST", path: pathf("/v1/conversations/%d/members", d), body: `{"userId":9}`,
			rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":9}`, d), status: 403, code: "forbidden"},
		{name: "add/unknown conversation", user: owner, method: "POST", path: pathf("/v1/conversations/%d/members", missing), body: `{"userId":9}`,
			rpc: "members.add", payload: pathf(`{"conversationId":%d,"userId":9}`, missing), status: 404, code: "not_found"},
		{name: "add/bad user id", user: owner, method: "POST", path: pathf("/v1/conversations/%d/members", g), body: `{"userId":0}`,
			rpc: "members.add", payload: pathf(`{"conversationId":%d}`, g), status: 400, code: "invalid"},
		{name: "add/no body", user: owner, method: "POST", path: pathf("/v1/conversations/%d/members", g), status: 400, code: "invalid"},

		// members.remove
		{name: "remove/owner over http", user: owner, method: "DELETE", path: pathf("/v1/conversations/%d/members/5", g), status: 204},
		{name: "remove/owner over rpc", user: owner, rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":6}`, g), status: 204},
		{name: "remove/admin over http", user: admin, method: "DELETE", path: pathf("/v1/conversations/%d/members/7", g), status: 204},
		{name: "remove/admin over rpc", user: admin, rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":8}`, g), status: 204},
		{name: "remove/admin removes owner", user: admin, method: "DELETE", path: pathf("/v1/conversations/%d/members/1", g),
			rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":1}`, g), status: 403, code: "forbidden"},
		{name: "remove/member removes another", user: member, method: "DELETE", path: pathf("/v1/conversations/%d/members/4", g),
			rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":4}`, g), status: 403, code: "forbidden"},
		{name: "remove/by outsider", user: outsider, method: "DELETE", path: pathf("/v1/conversations/%d/members/2", g),
			rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":2}`, g), status: 403, code: "not_member"},
		{name: "remove/not a member", user: owner, method: "DELETE", path: pathf("/v1/conversations/%d/members/9", g),
			rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":9}`, g), status: 404, code: "not_found"},
		{name: "remove/from direct", user: owner, method: "DELETE", path: pathf("/v1/conversations/%d/members/2", d),
			rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":2}`, d), status: 403, code: "forbidden"},
		{name: "remove/bad user id", user: owner, method: "DELETE", path: pathf("/v1/conversations/%d/members/x", g),
			rpc: "members.remove", payload: pathf(`{"conversationId":%d,"userId":-1}`, g), status: 400, code: "invalid"},

		// send
		{name: "send/ok", user: member, method: "POST", path: pathf("/v1/conversations/%d/messages", g), body: `{"clientMsgId":"` + newID() + `","body":"hi"}`,
			rpc: "send", payload: pathf(`{"conversationId":%d,"clientMsgId":"%s","body":"hi"}`, g, newID()), status: 201},
		{name: "send/outsider", user: outsider, method: "POST", path: pathf("/v1/conversations/%d/messages", g), body: `{"clientMsgId":"` + newID() + `","body":"hi"}`,
			rpc: "send", payload: pathf(`{"conversationId":%d,"clientMsgId":"%s","body":"hi"}`, g, newID()), status: 403, code: "not_member"},
		{name: "send/unknown conversation", user: owner, method: "POST", path: pathf("/v1/conversations/%d/messages", missing), body: `{"clientMsgId":"` + newID() + `","body":"hi"}`,
			rpc: "send", payload: pathf(`{"conversationId":%d,"clientMsgId":"%s","body":"hi"}`, missing, newID()), status: 404, code: "not_found"},
		{name: "send/bad clientMsgId", user: owner, method: "POST", path: pathf("/v1/conversations/%d/messages", g), body: `{"clientMsgId":"abc","body":"hi"}`,
			rpc: "send", payload: pathf(`{"conversationId":%d,"clientMsgId":"abc","body":"hi"}`, g), status: 400, code: "invalid"},
		{name: "send/empty body", user: owner, method: "POST", path: pathf("/v1/conversations/%d/messages", g), body: `{"clientMsgId":"` + newID() + `","body":""}`,
			rpc: "send", payload: pathf(`{"conversationId":%d,"clientMsgId":"%s"}`, g, newID()), status: 400, code: "invalid"},
		{name: "send/body over the limit", user: owner, method: "POST", path: pathf("/v1/conversations/%d/messages", g), body: `{"clientMsgId":"` + newID() + `","body":"` + big + `"}`,
			rpc: "send", payload: pathf(`{"conversationId":%d,"clientMsgId":"%s","body":"%s"}`, g, newID(), big), status: 413, code: "too_large"},

		// history
		{name: "history/member", user: member, method: "GET", path: pathf("/v1/conversations/%d/messages?limit=10", g),
			rpc: "history", payload: pathf(`{"conversationId":%d,"limit":10}`, g), status: 200},
		{name: "history/outsider", user: outsider, method: "GET", path: pathf("/v1/conversations/%d/messages", g),
			rpc: "history", payload: pathf(`{"conversationId":%d}`, g), status: 403, code: "not_member"},
		{name: "history/unknown conversation", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages", missing),
			rpc: "history", payload: pathf(`{"conversationId":%d}`, missing), status: 404, code: "not_found"},
		{name: "history/before and after", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages?beforeSeq=5&afterSeq=1", g),
			rpc: "history", payload: pathf(`{"conversationId":%d,"beforeSeq":5,"afterSeq":1}`, g), status: 400, code: "invalid"},
		{name: "history/negative limit", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages?limit=-1", g),
			rpc: "history", payload: pathf(`{"conversationId":%d,"limit":-1}`, g), status: 400, code: "invalid"},
		{name: "history/seq not a number", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages?afterSeq=x", g),
			rpc: "history", payload: pathf(`{"conversationId":%d,"afterSeq":"x"}`, g), status: 400, code: "invalid"},

		// read
		{name: "read/member", user: member, method: "POST", path: pathf("/v1/conversations/%d/read", g), body: `{"seq":1}`,
			rpc: "read", payload: pathf(`{"conversationId":%d,"seq":1}`, g), status: 200},
		{name: "read/outsider", user: outsider, method: "POST", path: pathf("/v1/conversations/%d/read", g), body: `{"seq":1}`,
			rpc: "read", payload: pathf(`{"conversationId":%d,"seq":1}`, g), status: 403, code: "not_member"},
		{name: "read/unknown conversation", user: owner, method: "POST", path: pathf("/v1/conversations/%d/read", missing), body: `{"seq":1}`,
			rpc: "read", payload: pathf(`{"conversationId":%d,"seq":1}`, missing), status: 404, code: "not_found"},
		{name: "read/seq zero", user: member, method: "POST", path: pathf("/v1/conversations/%d/read", g), body: `{"seq":0}`,
			rpc: "read", payload: pathf(`{"conversationId":%d}`, g), status: 400, code: "invalid"},

		// seen
		{name: "seen/member", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages/1/seen", g),
			rpc: "seen", payload: pathf(`{"conversationId":%d,"seq":1}`, g), status: 200},
		{name: "seen/outsider", user: outsider, method: "GET", path: pathf("/v1/conversations/%d/messages/1/seen", g),
			rpc: "seen", payload: pathf(`{"conversationId":%d,"seq":1}`, g), status: 403, code: "not_member"},
		{name: "seen/unknown message", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages/999/seen", g),
			rpc: "seen", payload: pathf(`{"conversationId":%d,"seq":999}`, g), status: 404, code: "not_found"},
		{name: "seen/seq zero", user: owner, method: "GET", path: pathf("/v1/conversations/%d/messages/0/seen", g),
			rpc: "seen", payload: pathf(`{"conversationId":%d,"seq":0}`, g), status: 400, code: "invalid"},

		// inbox
		{name: "inbox/ok", user: owner, method: "GET", path: "/v1/inbox",
			rpc: "inbox", payload: `{}`, status: 200},
		{name: "inbox/empty payload", user: owner, rpc: "inbox", payload: ``, status: 200},
		{name: "inbox/bad cursor", user: owner, method: "GET", path: "/v1/inbox?cursor=nope",
			rpc: "inbox", payload: `{"cursor":"nope"}`, status: 400, code: "invalid"},
		{name: "inbox/negative limit", user: owner, method: "GET", path: "/v1/inbox?limit=-1",
			rpc: "inbox", payload: `{"limit":-1}`, status: 400, code: "invalid"},

		// RPC framing
		{name: "rpc/unknown method", user: owner, rpc: "nope", payload: `{}`, status: 404, code: "not_found"},
		{name: "rpc/unknown field", user: owner, rpc: "inbox", payload: `{"limit":1,"bogus":true}`, status: 400, code: "invalid"},
		{name: "rpc/not an object", user: owner, rpc: "inbox", payload: `[1]`, status: 400, code: "invalid"},
		{name: "rpc/malformed", user: owner, rpc: "inbox", payload: `{"limit":`, status: 400, code: "invalid"},
		{name: "rpc/trailing data", user: owner, rpc: "inbox", payload: `{} {}`, status: 400, code: "invalid"},
		{name: "rpc/no user", user: 0, rpc: "inbox", payload: `{}`, status: 401, code: "unauthorized"},
	}

	for _, c := range cases {
		if c.method != "" {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := f.do(c.user, c.method, c.path, body)
			if r.status != c.status || r.errorCode() != c.code {
				t.Errorf("%s: HTTP %s %s: got %d %q, want %d %q; body %s",
					c.name, c.method, c.path, r.status, r.errorCode(), c.status, c.code, truncate(r.body))
			}
		}
		if c.rpc != "" {
			r := f.rpc(c.user, c.rpc, c.payload)
			if r.status != c.status || r.code != c.code {
				t.Errorf("%s: RPC %s: got %d %q, want %d %q; reply %s",
					c.name, c.rpc, r.status, r.code, c.status, c.code, truncate(r.raw))
			}
		}
	}
}

// TestRPCRepliesMatchHTTP checks that an RPC reply is the HTTP body plus
// "status", for every read-only operation (writes would differ by id).
func TestRPCRepliesMatchHTTP(t *testing.T) {
	f := newFixture(t)
	g := f.g
	f.must(200, member, "POST", pathf("/v1/conversations/%d/read", g), map[string]int{"seq": 1}, nil)
	pairs := []struct{ path, rpc, payload string }{
		{pathf("/v1/conversations/%d", g), "conversation.get", pathf(`{"conversationId":%d}`, g)},
		{pathf("/v1/conversations/%d/messages?limit=5", g), "history", pathf(`{"conversationId":%d,"limit":5}`, g)},
		{pathf("/v1/conversations/%d/messages/1/seen", g), "seen", pathf(`{"conversationId":%d,"seq":1}`, g)},
		{"/v1/inbox?limit=1", "inbox", `{"limit":1}`},
		{"/v1/conversations/abc", "conversation.get", `{"conversationId":0}`},
	}
	for _, p := range pairs {
		hr := f.do(owner, "GET", p.path, nil)
		var want map[string]any
		hr.decode(t, &want)
		rr := f.rpc(owner, p.rpc, p.payload)
		if rr.status != hr.status {
			t.Errorf("%s: RPC status %d, HTTP %d", p.rpc, rr.status, hr.status)
		}
		if got := rr.withoutStatus(t); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: RPC reply %s differs from HTTP body %s", p.rpc, rr.raw, hr.body)
		}
	}
	// A write replayed: the duplicate send answers the same over both.
	id := newID()
	first := f.sendMsg(member, g, id, "once")
	rr := f.rpc(member, "send", pathf(`{"conversationId":%d,"clientMsgId":"%s","body":"once"}`, g, id))
	var got struct{ Seq int64 }
	if err := json.Unmarshal(rr.raw, &got); err != nil || rr.status != 200 || got.Seq != first.Seq {
		t.Errorf("RPC resend of an HTTP send: %s, want status 200 and seq %d", rr.raw, first.Seq)
	}
}

// TestConversationShapes checks the bodies of create, get and direct.open.
func TestConversationShapes(t *testing.T) {
	e := newEnv(t)
	var c chat.Conversation
	e.must(201, owner, "POST", "/v1/conversations", map[string]any{"type": "GROUP", "title": "team", "members": []int64{2, 4, 2, 1}}, &c)
	if c.ID <= 0 || c.Type != chat.Group || c.Title != "team" || c.LastSeq != 0 {
		t.Fatalf("created %+v", c)
	}
	e.promote(c.ID, admin)
	var got chat.Conversation
	e.must(200, member, "GET", pathf("/v1/conversations/%d", c.ID), nil, &got)
	roles := map[int64]chat.Role{}
	for _, m := range got.Members {
		roles[m.UserID] = m.Role
	}
	want := map[int64]chat.Role{owner: chat.RoleOwner, member: chat.RoleMember, admin: chat.RoleAdmin}
	if !reflect.DeepEqual(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}

	// direct: 201 once, then 200 with the same conversation from either side.
	var d1, d2, d3 chat.Conversation
	e.must(201, 10, "POST", "/v1/direct/11", nil, &d1)
	e.must(200, 10, "POST", "/v1/direct/11", nil, &d2)
	e.must(200, 11, "POST", "/v1/direct/10", "{}", &d3)
	if d1.ID != d2.ID || d1.ID != d3.ID || d1.Type != chat.Direct || len(d1.Members) != 2 {
		t.Errorf("direct conversations %+v %+v %+v", d1, d2, d3)
	}
	rr := e.rpc(12, "direct.open", `{"peerId":10}`)
	if rr.status != 201 {
		t.Errorf("direct.open new pair: %s", rr.raw)
	}

	// members.add answers the member.
	var m chat.Member
	e.must(201, owner, "POST", pathf("/v1/conversations/%d/members", c.ID), map[string]int64{"userId": 9}, &m)
	if m.UserID != 9 || m.Role != chat.RoleMember {
		t.Errorf("added member %+v", m)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
