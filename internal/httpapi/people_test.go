package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// Profiles over HTTP and RPC: set, read back, 404 for users one shares no
// conversation with (unknown ones alike), the batch with its ETag.
func TestProfilesOverHTTPAndRPCHideStrangersAndCacheWithETag(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	var p chat.Profile
	e.must(200, 1, "PUT", "/v1/me", map[string]any{"displayName": "  Ann Lee  ", "about": "climber", "avatarUrl": "https://img.example/a.png"}, &p)
	if p.DisplayName != "Ann Lee" || p.About != "climber" || p.Avatar == nil {
		t.Fatalf("stored %+v", p)
	}
	for _, bad := range []map[string]any{
		{"displayName": ""}, {"displayName": "   "}, {"displayName": "a\u0007b"},
		{"displayName": string(make([]rune, 65))}, {"displayName": "x", "avatarUrl": "http://img.example/a.png"},
		{"displayName": "x", "avatarUrl": "javascript:alert(1)"}, {"displayName": "x", "nick": "y"},
	} {
		if r := e.do(1, "PUT", "/v1/me", bad); r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("PUT /v1/me %v: %d %s", bad, r.status, r.body)
		}
	}
	var me chat.Me
	e.must(200, 1, "GET", "/v1/me", nil, &me)
	if me.DisplayName != "Ann Lee" || !me.Settings.ReadReceipts || !me.Settings.Presence {
		t.Fatalf("GET /v1/me %+v", me)
	}
	e.must(200, 2, "GET", "/v1/users/1", nil, &p)
	if p.ID != 1 || p.DisplayName != "Ann Lee" {
		t.Fatalf("member sees %+v", p)
	}
	// Strangers and unknown users answer alike: not found.
	for _, path := range []string{"/v1/users/1", "/v1/users/424242"} {
		if r := e.do(9, "GET", path, nil); r.status != 404 || r.errorCode() != "not_found" {
			t.Fatalf("stranger GET %s: %d %s", path, r.status, r.body)
		}
	}
	if rr := e.rpc(9, "user.get", `{"userId":1}`); rr.status != 404 {
		t.Fatalf("stranger rpc user.get: %s", rr.raw)
	}

	var users httpapi.UsersReply
	r := e.must(200, 2, "GET", "/v1/users?ids=1,9,2,1", nil, &users)
	if len(users.Users) != 2 || users.Users[0].ID != 1 || users.Users[1].ID != 2 {
		t.Fatalf("batch %+v (9 shares nothing with 2)", users)
	}
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("batch headers %v", r.header)
	}
	if r := e.do(2, "GET", "/v1/users?ids=1,9,2,1", nil, withHeader("If-None-Match", tag)); r.status != 304 || len(r.body) != 0 {
		t.Fatalf("revalidation: %d %q", r.status, r.body)
	}
	e.must(200, 1, "PUT", "/v1/me", map[string]any{"displayName": "Ann"}, nil)
	if r := e.do(2, "GET", "/v1/users?ids=1,9,2,1", nil, withHeader("If-None-Match", tag)); r.status != 200 || r.header.Get("ETag") == tag {
		t.Fatalf("after a change: %d, ETag %q", r.status, r.header.Get("ETag"))
	}
	rr := e.rpc(2, "users.get", `{"ids":[1,2]}`)
	if rr.status != 200 {
		t.Fatalf("rpc users.get %s", rr.raw)
	}
	for _, q := range []string{"/v1/users", "/v1/users?ids=", "/v1/users?ids=0", "/v1/users?ids=a"} {
		if r := e.do(2, "GET", q, nil); r.status != 400 {
			t.Errorf("GET %s: %d", q, r.status)
		}
	}
	many := "1"
	for i := 2; i <= 101; i++ {
		many += "," + pathf("%d", i)
	}
	if r := e.do(2, "GET", "/v1/users?ids="+many, nil); r.status != 400 {
		t.Errorf("101 ids: %d", r.status)
	}
	// The inbox names a direct conversation's peer.
	var d chat.Conversation
	e.must(201, 1, "POST", "/v1/direct/2", nil, &d)
	if d.PeerID != 2 {
		t.Fatalf("direct.open peerId %d", d.PeerID)
	}
	var in chat.InboxPage
	e.must(200, 2, "GET", "/v1/inbox", nil, &in)
	for _, c := range in.Conversations {
		if c.ID == d.ID && c.PeerID != 1 {
			t.Fatalf("inbox peerId %+v", c)
		}
		if c.ID == g && c.PeerID != 0 {
			t.Fatalf("group with a peerId %+v", c)
		}
	}
}

// Group administration over HTTP: rename, roles, transfer, members page,
// and the refusals with their codes.
func TestGroupAdministrationOverHTTP(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2, 3)
	conv := pathf("/v1/conversations/%d", g)
	if r := e.do(3, "PATCH", conv, map[string]string{"title": "mine now"}); r.status != 403 || r.errorCode() != "forbidden" {
		t.Fatalf("member renames: %d %s", r.status, r.body)
	}
	if r := e.do(9, "PATCH", conv, map[string]string{"title": "x"}); r.status != 403 || r.errorCode() != "not_member" {
		t.Fatalf("stranger renames: %d %s", r.status, r.body)
	}
	if r := e.do(1, "PATCH", conv, map[string]string{}); r.status != 400 {
		t.Fatalf("empty patch: %d %s", r.status, r.body)
	}
	if r := e.do(1, "PATCH", conv, map[string]string{"historyVisible": "some"}); r.status != 400 {
		t.Fatalf("bad historyVisible: %d %s", r.status, r.body)
	}
	var c chat.Conversation
	e.must(200, 1, "PATCH", conv, map[string]string{"title": "Crag crew", "about": "Sundays"}, &c)
	if c.Title != "Crag crew" || c.About != "Sundays" || c.HistoryVisible != chat.HistoryJoined {
		t.Fatalf("patched %+v", c)
	}
	var m chat.Member
	e.must(200, 1, "PUT", conv+"/members/2/role", map[string]string{"role": "admin"}, &m)
	if m.Role != chat.RoleAdmin {
		t.Fatalf("role %+v", m)
	}
	if r := e.do(2, "PUT", conv+"/members/3/role", map[string]string{"role": "admin"}); r.status != 403 {
		t.Fatalf("admin grants admin: %d %s", r.status, r.body)
	}
	if r := e.do(1, "PUT", conv+"/members/3/role", map[string]string{"role": "owner"}); r.status != 400 {
		t.Fatalf("role owner: %d %s", r.status, r.body)
	}
	if rr := e.rpc(2, "conversation.update", pathf(`{"conversationId":%d,"title":"by rpc"}`, g)); rr.status != 200 {
		t.Fatalf("admin rpc rename: %s", rr.raw)
	}
	if r := e.do(2, "POST", conv+"/owner", map[string]int64{"userId": 2}); r.status != 403 {
		t.Fatalf("admin takes ownership: %d %s", r.status, r.body)
	}
	e.must(204, 1, "POST", conv+"/owner", map[string]int64{"userId": 3}, nil)
	var page chat.MembersPage
	e.must(200, 1, "GET", conv+"/members?limit=2", nil, &page)
	if len(page.Members) != 2 || page.Members[0].UserID != 3 || page.Members[0].Role != chat.RoleOwner || page.NextCursor == "" {
		t.Fatalf("members page %+v", page)
	}
	var rest chat.MembersPage
	e.must(200, 1, "GET", conv+"/members?limit=2&cursor="+page.NextCursor, nil, &rest)
	if len(rest.Members) != 1 || rest.NextCursor != "" {
		t.Fatalf("second page %+v", rest)
	}
	if r := e.do(9, "GET", conv+"/members", nil); r.status != 403 {
		t.Fatalf("stranger lists members: %d", r.status)
	}
	// History shows the changes as system entries.
	var h httpapi.HistoryReply
	e.must(200, 2, "GET", conv+"/messages", nil, &h)
	var actions []string
	for _, m := range h.Messages {
		if m.Kind == chat.KindSystem {
			actions = append(actions, string(m.System.Action))
		}
	}
	if len(actions) != 4 || actions[0] != "group.updated" || actions[3] != "owner.changed" {
		t.Fatalf("system entries %v", actions)
	}
	raw := e.must(200, 2, "GET", conv+"/messages", nil, nil)
	var wire struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(raw.body, &wire); err != nil {
		t.Fatal(err)
	}
	if first := wire.Messages[0]; first["kind"] != "system" || first["action"] != "group.updated" || first["title"] != "Crag crew" ||
		first["actorId"] != float64(1) || first["body"] != nil {
		t.Fatalf("a system entry on the wire: %v", first)
	}
}

// Privacy and blocks over HTTP: settings, the blocked user's 403 blocked
// on open and send, seen-by hiding.
func TestSettingsAndBlocksOverHTTP(t *testing.T) {
	e := newEnv(t)
	var d chat.Conversation
	e.must(201, 1, "POST", "/v1/direct/2", nil, &d)
	msg := e.sendMsg(1, d.ID, newID(), "hello")
	var st chat.Settings
	e.must(200, 2, "PUT", "/v1/me/settings", map[string]bool{"readReceipts": false}, &st)
	if st.ReadReceipts || !st.Presence {
		t.Fatalf("settings %+v", st)
	}
	e.must(200, 2, "POST", pathf("/v1/conversations/%d/read", d.ID), map[string]int64{"seq": msg.Seq}, nil)
	var seen chat.SeenResult
	e.must(200, 1, "GET", pathf("/v1/conversations/%d/messages/%d/seen", d.ID, msg.Seq), nil, &seen)
	if seen.SeenBy != 0 || seen.DeliveredTo != 0 {
		t.Fatalf("seen %+v: the reader hides read receipts, and reading is not shown as delivery either", seen)
	}
	if r := e.do(2, "PUT", "/v1/me/settings", map[string]any{"readReceipts": "no"}); r.status != 400 {
		t.Fatalf("bad settings: %d", r.status)
	}

	e.must(204, 1, "PUT", "/v1/me/blocks/2", nil, nil)
	if r := e.do(2, "POST", "/v1/direct/1", nil); r.status != 403 || r.errorCode() != "blocked" {
		t.Fatalf("blocked opens: %d %s", r.status, r.body)
	}
	if r := e.do(2, "POST", pathf("/v1/conversations/%d/messages", d.ID), map[string]string{"clientMsgId": newID(), "body": "hey"}); r.status != 403 || r.errorCode() != "blocked" {
		t.Fatalf("blocked sends: %d %s", r.status, r.body)
	}
	if rr := e.rpc(2, "send", pathf(`{"conversationId":%d,"clientMsgId":%q,"body":"hey"}`, d.ID, newID())); rr.status != 403 || rr.code != "blocked" {
		t.Fatalf("blocked rpc send: %s", rr.raw)
	}
	var bl httpapi.BlocksReply
	e.must(200, 1, "GET", "/v1/me/blocks", nil, &bl)
	if len(bl.Blocked) != 1 || bl.Blocked[0].UserID != 2 {
		t.Fatalf("blocks %+v", bl)
	}
	if r := e.do(1, "PUT", "/v1/me/blocks/1", nil); r.status != 400 {
		t.Fatalf("block oneself: %d", r.status)
	}
	e.must(204, 1, "DELETE", "/v1/me/blocks/2", nil, nil)
	e.sendMsg(2, d.ID, newID(), "thanks")
	if blocked, err := e.svc.IsBlocked(t.Context(), 1, 2); err != nil || blocked {
		t.Fatalf("IsBlocked after unblock: %v %v", blocked, err)
	}
}

// Search over HTTP and RPC: hits with snippets and highlights, the query's
// validation, the RPC twin answering the same.
func TestSearchOverHTTPAndRPC(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	e.sendMsg(2, g, newID(), "我们明天在北京开会")
	e.sendMsg(2, g, newID(), "lunch at noon?")
	var page chat.SearchPage
	e.must(200, 1, "GET", "/v1/search?q=%E5%8C%97%E4%BA%AC", nil, &page)
	if len(page.Results) != 1 || page.Results[0].Snippet != "我们明天在北京开会" || len(page.Results[0].Highlights) != 1 ||
		page.Results[0].Highlights[0] != [2]int{5, 7} {
		t.Fatalf("search 北京: %+v", page)
	}
	rr := e.rpc(1, "search", `{"q":"北京"}`)
	if rr.status != http.StatusOK {
		t.Fatalf("rpc search %s", rr.raw)
	}
	var rp chat.SearchPage
	decodeInto(t, rr.raw, &rp)
	if len(rp.Results) != 1 || rp.Results[0].Seq != page.Results[0].Seq {
		t.Fatalf("rpc search %+v", rp)
	}
	e.must(200, 1, "GET", pathf("/v1/search?q=noon&conversationId=%d&senderId=2&after=2000-01-01T00:00:00Z&limit=5", g), nil, &page)
	if len(page.Results) != 1 {
		t.Fatalf("filtered search %+v", page)
	}
	for _, q := range []string{"/v1/search", "/v1/search?q=", "/v1/search?q=x&before=yesterday", "/v1/search?q=x&cursor=zz", "/v1/search?q=x&page=2"} {
		if r := e.do(1, "GET", q, nil); r.status != 400 {
			t.Errorf("GET %s: %d %s", q, r.status, r.body)
		}
	}
	if r := e.do(9, "GET", pathf("/v1/search?q=noon&conversationId=%d", g), nil); r.status != 403 {
		t.Fatalf("stranger searches a group: %d", r.status)
	}
	e.must(200, 9, "GET", "/v1/search?q=noon", nil, &page)
	if len(page.Results) != 0 {
		t.Fatalf("stranger finds %+v", page)
	}
}

// Search over HTTP compares folded text: a word sent with a decomposed
// accent is found by the composed one, a capital in any script by its
// lower case, and the highlight covers the characters as sent.
func TestSearchOverHTTPFindsWordsHoweverTheyAreComposedOrCased(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	e.sendMsg(2, g, newID(), "meet at the cafe\u0301")
	e.sendMsg(2, g, newID(), "Привет всем")
	for q, word := range map[string]string{"caf%C3%A9": "cafe\u0301", "%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82": "Привет"} {
		var page chat.SearchPage
		e.must(200, 1, "GET", "/v1/search?q="+q, nil, &page)
		if len(page.Results) != 1 {
			t.Errorf("search %s: %+v", q, page)
			continue
		}
		h := page.Results[0]
		if rs := []rune(h.Snippet); len(h.Highlights) != 1 || string(rs[h.Highlights[0][0]:h.Highlights[0][1]]) != word {
			t.Errorf("search %s: highlights %v of %q, want %q", q, h.Highlights, h.Snippet, word)
		}
	}
}

// Every reply that carries a member, over HTTP and RPC, hides the read
// watermark of a member whose read receipts are off, as the conversation
// does: a role change, and an add of someone already a member.
func TestMemberRepliesHideAHiddenReadersLastReadSeq(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	msg := e.sendMsg(1, g, newID(), "hello")
	e.must(200, 2, "PUT", "/v1/me/settings", map[string]bool{"readReceipts": false}, nil)
	e.must(200, 2, "POST", pathf("/v1/conversations/%d/read", g), map[string]int64{"seq": msg.Seq}, nil)

	hidden := func(what string, m chat.Member) {
		t.Helper()
		if m.UserID != 2 || m.LastReadSeq != 0 || m.LastDeliveredSeq != 0 {
			t.Errorf("%s: %+v, want user 2 with lastReadSeq and lastDeliveredSeq 0", what, m)
		}
	}
	var m chat.Member
	e.must(200, 1, "PUT", pathf("/v1/conversations/%d/members/2/role", g), map[string]string{"role": "admin"}, &m)
	hidden("role change over HTTP", m)
	e.must(200, 1, "POST", pathf("/v1/conversations/%d/members", g), map[string]int64{"userId": 2}, &m)
	hidden("add of a member over HTTP", m)
	for _, c := range []struct{ method, payload string }{
		{"members.role", pathf(`{"conversationId":%d,"userId":2,"role":"member"}`, g)},
		{"members.add", pathf(`{"conversationId":%d,"userId":2}`, g)},
	} {
		r := e.rpc(1, c.method, c.payload)
		var rm chat.Member
		decodeInto(t, r.raw, &rm)
		if r.status != 200 {
			t.Fatalf("%s: %s", c.method, r.raw)
		}
		hidden(c.method+" over RPC", rm)
	}
}

// Creating a group obeys the title rule a rename does: control and
// bidirectional characters are refused, the title is trimmed; no title at
// all is still allowed.
func TestCreatingAGroupRefusesATitleARenameWould(t *testing.T) {
	e := newEnv(t)
	for _, title := range []string{"evil\u202egnp.exe", "ding\a", "two\nlines", "\u2066isolated"} {
		for _, transport := range []string{"HTTP", "RPC"} {
			body := map[string]any{"type": "group", "title": title}
			status, code := 0, ""
			if transport == "HTTP" {
				r := e.do(1, "POST", "/v1/conversations", body)
				status, code = r.status, r.errorCode()
			} else {
				b, _ := json.Marshal(body)
				r := e.rpc(1, "conversation.create", string(b))
				status, code = r.status, r.code
			}
			if status != 400 || code != "invalid" {
				t.Errorf("create over %s with title %q: %d %q, want 400 invalid", transport, title, status, code)
			}
		}
	}
	var c chat.Conversation
	e.must(201, 1, "POST", "/v1/conversations", map[string]any{"type": "group", "title": "  Crag crew  "}, &c)
	if c.Title != "Crag crew" {
		t.Fatalf("title %q, want it trimmed as a rename trims it", c.Title)
	}
	e.must(201, 1, "POST", "/v1/conversations", map[string]any{"type": "group"}, &c)
	if c.Title != "" {
		t.Fatalf("untitled group got title %q", c.Title)
	}
}

// A display name or a group title must show something: one made only of
// characters that draw nothing (zero-width spaces and joiners, Hangul
// fillers, the blank Braille pattern) passed as "1 to 64 characters" and
// showed an empty name in every member list and message header, where
// clients show "User <id>" for a user with no name at all. Names with
// such characters among visible ones are kept as given.
func TestADisplayNameOrGroupTitleThatShowsNothingIsRefused(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	for _, blank := range []string{"\u200b", "\u200b\u200c\u200d", "\u3164", "\u3164\u3164", "\u2800", "\ufeff", "\u2060 \u200b", "\u115f\u1160", "\u0301"} {
		if r := e.do(1, "PUT", "/v1/me", map[string]any{"displayName": blank}); r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("display name %q: %d %s, want 400 invalid", blank, r.status, r.body)
		}
		if r := e.do(1, "PATCH", pathf("/v1/conversations/%d", g), map[string]any{"title": blank}); r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("group title %q: %d %s, want 400 invalid", blank, r.status, r.body)
		}
		if r := e.do(1, "POST", "/v1/conversations", map[string]any{"type": "group", "title": blank}); r.status != 400 || r.errorCode() != "invalid" {
			t.Errorf("new group titled %q: %d %s, want 400 invalid", blank, r.status, r.body)
		}
	}
	for _, name := range []string{"Zoë", "👩\u200d💻", "李", "e\u0301", "-", "ㅤAnn"} {
		var p chat.Profile
		e.must(200, 1, "PUT", "/v1/me", map[string]any{"displayName": name}, &p)
		if p.DisplayName != name {
			t.Errorf("display name %q stored as %q", name, p.DisplayName)
		}
	}
	var c chat.Conversation
	e.must(200, 1, "PATCH", pathf("/v1/conversations/%d", g), map[string]any{"title": "👩\u200d💻 team"}, &c)
}

// A negative conversationId or senderId is refused with a message that
// names the field and does not refuse 0 (it means any): over RPC, which
// reaches the service's check, "must be positive integers" read as if 0
// were refused too. HTTP's query parsing refuses it first, as a
// non-negative integer parameter.
func TestSearchRefusesANegativeIdSayingZeroMeansAny(t *testing.T) {
	e := newEnv(t)
	for field, want := range map[string]string{
		"conversationId": "conversationId must not be negative; 0 or absent means any conversation",
		"senderId":       "senderId must not be negative; 0 or absent means any sender",
	} {
		r := e.do(1, "GET", "/v1/search?q=x&"+field+"=-1", nil)
		var eb httpapi.ErrorBody
		if r.status != 400 || json.Unmarshal(r.body, &eb) != nil || eb.Error.Code != "invalid" ||
			eb.Error.Message != field+" must be a non-negative integer" {
			t.Errorf("GET /v1/search with %s=-1: %d %s, want 400 invalid, %s must be a non-negative integer", field, r.status, r.body, field)
		}
		if rr := e.rpc(1, "search", `{"q":"x","`+field+`":-1}`); rr.status != 400 || !strings.Contains(string(rr.raw), want) {
			t.Errorf("rpc search with %s=-1: %s, want %q", field, rr.raw, want)
		}
		if r := e.do(1, "GET", "/v1/search?q=x&"+field+"=0", nil); r.status != 200 {
			t.Errorf("GET /v1/search with %s=0: %d %s", field, r.status, r.body)
		}
	}
}
