package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/push"
)

// secret marks every text an outsider must not learn: message bodies,
// captions, titles, a display name, a device token. The probes' own
// inputs never hold it.
const secret = "SECRET"

// thumbsUp is 👍 as a path segment.
const thumbsUp = "%F0%9F%91%8D"

// doorFixture is what the outsider probes knock on.
//
//   - g: a group of gOwner and gMember, titled secret, holding a message
//     with a photo, a message by gRemoved (sent while a member, seq
//     removedSeq, clientMsgId removedMsg), then gRemoved removed by the
//     owner and gLeaver gone on their own, and a message after both; then
//     late added, for whom all of that came before their join.
//   - dir: the direct conversation of blocker and blocked, with a message
//     of each (blocked's at blockedSeq), then blocker blocks blocked.
//   - upload: a pending upload of gOwner's for g; photo: the attachment
//     of g's first message; device: a device of gOwner's.
type doorFixture struct {
	*env
	g, dir                 int64
	removedSeq, blockedSeq int64
	removedMsg             string
	upload, photo          string
	device                 int64
	// own is a direct conversation of each outsider of g with pal, into
	// which they may send: what they name from g must not come along.
	own map[int64]int64
	// mine is a group gMember owns, to name others' uploads as its avatar.
	mine int64
}

// Users of the door fixture. stranger never was a member of anything.
const (
	gOwner   int64 = 1
	gMember  int64 = 2
	stranger int64 = 3
	gRemoved int64 = 5
	gLeaver  int64 = 6
	blocker  int64 = 10
	blocked  int64 = 11
	pal      int64 = 20
	// late joined g after its messages; g's history is "joined", so
	// what came before is not theirs to read.
	late int64 = 30
)

func newDoorFixture(t *testing.T) doorFixture {
	e := newEnv(t)
	e.withAttachments()
	e.svc.Push = push.NewDevices(e.pool, "BKey", true, true)
	f := doorFixture{env: e}
	e.must(http.StatusOK, gOwner, "PUT", "/v1/me", map[string]string{"displayName": secret + " owner"}, nil)
	var c chat.Conversation
	e.must(http.StatusCreated, gOwner, "POST", "/v1/conversations",
		map[string]any{"type": "group", "title": secret + " group", "members": []int64{gMember, gRemoved, gLeaver}}, &c)
	f.g = c.ID

	photo := mediatest.JPEG(64, 48)
	var tk chat.UploadTicket
	e.must(http.StatusCreated, gOwner, "POST", "/v1/uploads",
		map[string]any{"conversationId": f.g, "name": secret + ".jpg", "contentType": "image/jpeg", "size": len(photo)}, &tk)
	if r := e.do(gOwner, "PUT", "/v1/uploads/"+tk.UploadID, photo, withHeader("Content-Type", "image/jpeg")); r.status != http.StatusOK {
		t.Fatalf("PUT the photo: %d %s", r.status, r.body)
	}
	e.must(http.StatusCreated, gOwner, "POST", pathf("/v1/conversations/%d/messages", f.g),
		map[string]any{"clientMsgId": newID(), "body": secret + " one",
			"attachments": []map[string]string{{"uploadId": tk.UploadID, "caption": secret + " caption"}}}, nil)
	f.photo = tk.UploadID

	f.removedMsg = newID()
	f.removedSeq = e.sendMsg(gRemoved, f.g, f.removedMsg, "mine").Seq
	e.sendMsg(gLeaver, f.g, newID(), "bye")
	e.must(http.StatusNoContent, gOwner, "DELETE", pathf("/v1/conversations/%d/members/%d", f.g, gRemoved), nil, nil)
	e.must(http.StatusNoContent, gLeaver, "DELETE", pathf("/v1/conversations/%d/members/%d", f.g, gLeaver), nil, nil)
	e.sendMsg(gOwner, f.g, newID(), secret+" after")

	e.must(http.StatusCreated, gOwner, "POST", pathf("/v1/conversations/%d/members", f.g), map[string]int64{"userId": late}, nil)

	var up chat.UploadTicket
	e.must(http.StatusCreated, gOwner, "POST", "/v1/uploads",
		map[string]any{"conversationId": f.g, "name": secret + "2.jpg", "contentType": "image/jpeg", "size": len(photo)}, &up)
	f.upload = up.UploadID

	var dev struct{ ID int64 }
	e.must(http.StatusCreated, gOwner, "POST", "/v1/devices", map[string]string{"platform": "fcm", "token": secret + "-token"}, &dev)
	f.device = dev.ID

	f.own = map[int64]int64{}
	for _, u := range []int64{stranger, gRemoved, gLeaver, late} {
		var c chat.Conversation
		e.must(http.StatusCreated, u, "POST", pathf("/v1/direct/%d", pal), nil, &c)
		f.own[u] = c.ID
	}
	var mine chat.Conversation
	e.must(http.StatusCreated, gMember, "POST", "/v1/conversations", map[string]any{"type": "group", "title": "mine", "members": []int64{}}, &mine)
	f.mine = mine.ID

	var d chat.Conversation
	e.must(http.StatusCreated, blocker, "POST", pathf("/v1/direct/%d", blocked), nil, &d)
	f.dir = d.ID
	e.sendMsg(blocker, f.dir, newID(), secret+" direct")
	f.blockedSeq = e.sendMsg(blocked, f.dir, newID(), "hi").Seq
	e.must(http.StatusNoContent, blocker, "PUT", pathf("/v1/me/blocks/%d", blocked), nil, nil)
	return f
}

// state is a digest of every table in the database: equal digests, nothing
// stored.
func (e *env) state() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		e.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	out := make(map[string]string, len(tables))
	for _, n := range tables {
		var sum string
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM "`+n+`" t`).Scan(&sum); err != nil {
			e.t.Fatalf("digest %s: %v", n, err)
		}
		out[n] = sum
	}
	return out
}

// changed names the tables whose digest differs.
func changed(before, after map[string]string) []string {
	var out []string
	for n, s := range after {
		if before[n] != s {
			out = append(out, n)
		}
	}
	return out
}

// knock is one attempt through a door: over HTTP (method, path, body,
// header opts) and, when the route has an RPC twin, over RPC (payload).
// want is the status; code the error code, "" for an answer that is not
// a refusal but must still hold no secret (a list of one's own, a
// resend one is entitled to).
type knock struct {
	who     string
	user    int64
	path    string
	body    any
	opts    []reqOpt
	payload string
	want    int
	code    string
}

// TestEveryConversationScopedDoorRefusesAnOutsider: every route (and so
// every RPC method, which reaches the same operation) is classified here;
// a route that is not fails the test, so a new one must say how it keeps
// outsiders out. Each door that names a conversation, a message, an
// attachment, an upload, a device or another user is knocked on by a user
// who never was a member, one who was removed, one who left, a user
// blocked by the other member of a direct conversation (where writing is
// what the block forbids), a user naming another's upload, attachment or
// device, and a member added later, for what came before their join: each
// is refused with the documented status and code, the answer is an error
// body alone with none of the conversation's text in it, and no table of
// the database changes. The few answers that are no refusal (a removed
// sender's resend of their own message, a leave repeated, one's own
// lists, a late member's pages) hold no text they may not read either.
func TestEveryConversationScopedDoorRefusesAnOutsider(t *testing.T) {
	f := newDoorFixture(t)
	g, dir := f.g, f.dir
	conv := func(format string) string { return pathf(format, g) }
	msg := func(format string, seq int64) string { return pathf(format, g, seq) }
	gp := func(extra string) string { return pathf(`{"conversationId":%d%s}`, g, extra) }
	outsiders := []struct {
		who  string
		user int64
	}{{"never a member", stranger}, {"removed", gRemoved}, {"left", gLeaver}}
	// every is the same knock by each outsider of g.
	every := func(path string, body any, payload string, want int, code string) []knock {
		var out []knock
		for _, o := range outsiders {
			out = append(out, knock{who: o.who, user: o.user, path: path, body: body, payload: payload, want: want, code: code})
		}
		return out
	}
	notMember := func(path string, body any, payload string) []knock {
		return every(path, body, payload, http.StatusForbidden, "not_member")
	}
	isBlocked := func(path string, body any, payload string) knock {
		return knock{who: "blocked", user: blocked, path: path, body: body, payload: payload, want: http.StatusForbidden, code: "blocked"}
	}
	dirp := func(format string, args ...any) string { return pathf(format, append([]any{dir}, args...)...) }
	jpeg := withHeader("Content-Type", "image/jpeg")

	// doors maps "METHOD PATH" of every route to its knocks; nil with a
	// reason in open says why the route names nothing of anyone else's.
	doors := map[string][]knock{
		"POST /v1/conversations": {
			{who: "blocked", user: blocked, path: "/v1/conversations", body: map[string]any{"type": "group", "title": "t", "members": []int64{blocker}},
				payload: pathf(`{"type":"group","title":"t","members":[%d]}`, blocker), want: http.StatusForbidden, code: "blocked"},
		},
		"POST /v1/direct/{peerId}": {
			isBlocked(pathf("/v1/direct/%d", blocker), nil, pathf(`{"peerId":%d}`, blocker)),
		},
		"GET /v1/conversations/{id}": notMember(conv("/v1/conversations/%d"), nil, gp("")),
		"POST /v1/conversations/{id}/members": append(
			// Adding oneself back, or someone else.
			notMember(conv("/v1/conversations/%d/members"), map[string]int64{"userId": stranger}, gp(pathf(`,"userId":%d`, stranger))),
			notMember(conv("/v1/conversations/%d/members"), map[string]int64{"userId": gRemoved}, gp(pathf(`,"userId":%d`, gRemoved)))...),
		"DELETE /v1/conversations/{id}/members/{userId}": append(
			notMember(msg("/v1/conversations/%d/members/%d", gMember), nil, gp(pathf(`,"userId":%d`, gMember))),
			knock{who: "never a member leaving", user: stranger, path: msg("/v1/conversations/%d/members/%d", stranger),
				payload: gp(pathf(`,"userId":%d`, stranger)), want: http.StatusForbidden, code: "not_member"},
			// A leave repeated changes nothing and answers as the first.
			knock{who: "left, leaving again", user: gLeaver, path: msg("/v1/conversations/%d/members/%d", gLeaver),
				payload: gp(pathf(`,"userId":%d`, gLeaver)), want: http.StatusNoContent},
			knock{who: "removed, leaving", user: gRemoved, path: msg("/v1/conversations/%d/members/%d", gRemoved),
				payload: gp(pathf(`,"userId":%d`, gRemoved)), want: http.StatusNoContent}),
		"POST /v1/conversations/{id}/messages": append(
			notMember(conv("/v1/conversations/%d/messages"), map[string]string{"clientMsgId": "7d8f1a52-0000-4000-8000-000000000001", "body": "x"},
				gp(`,"clientMsgId":"7d8f1a52-0000-4000-8000-000000000002","body":"x"`)),
			isBlocked(dirp("/v1/conversations/%d/messages"), map[string]string{"clientMsgId": "7d8f1a52-0000-4000-8000-000000000003", "body": "x"},
				dirp(`{"conversationId":%d,"clientMsgId":"7d8f1a52-0000-4000-8000-000000000004","body":"x"}`)),
			// A message of g forwarded, or another's upload attached, into
			// a conversation of the outsider's own.
			f.intoOwn(stranger, "forward", pathf(`"forward":{"conversationId":%d,"seq":1}`, g), http.StatusForbidden, "forbidden"),
			f.intoOwn(gRemoved, "forward", pathf(`"forward":{"conversationId":%d,"seq":1}`, g), http.StatusForbidden, "forbidden"),
			f.intoOwn(gRemoved, "forward of their own", pathf(`"forward":{"conversationId":%d,"seq":%d}`, g, f.removedSeq), http.StatusForbidden, "forbidden"),
			f.intoOwn(gLeaver, "forward", pathf(`"forward":{"conversationId":%d,"seq":1}`, g), http.StatusForbidden, "forbidden"),
			f.intoOwn(stranger, "another's upload", `"attachments":[{"uploadId":"`+f.upload+`"}]`, http.StatusForbidden, "forbidden"),
			f.intoOwn(stranger, "another's attachment", `"attachments":[{"uploadId":"`+f.photo+`"}]`, http.StatusForbidden, "forbidden"),
			knock{who: "a member, another's upload", user: gMember, path: conv("/v1/conversations/%d/messages"),
				body:    `{"clientMsgId":"7d8f1a52-0000-4000-8000-000000000010","attachments":[{"uploadId":"` + f.upload + `"}]}`,
				payload: gp(`,"clientMsgId":"7d8f1a52-0000-4000-8000-000000000011","attachments":[{"uploadId":"` + f.upload + `"}]`),
				want:    http.StatusForbidden, code: "forbidden"},
			// A removed sender's resend of what they sent as a member is
			// the duplicate they are entitled to, and no more.
			knock{who: "removed, resending their own", user: gRemoved, path: conv("/v1/conversations/%d/messages"),
				body: map[string]string{"clientMsgId": f.removedMsg, "body": "mine"}, payload: gp(`,"clientMsgId":"` + f.removedMsg + `","body":"mine"`), want: http.StatusOK}),
		"GET /v1/conversations/{id}/messages": append(
			notMember(conv("/v1/conversations/%d/messages"), nil, gp("")),
			notMember(conv("/v1/conversations/%d/messages?afterSeq=0"), nil, gp(`,"afterSeq":0`))...),
		"PATCH /v1/conversations/{id}/messages/{seq}": append(
			notMember(msg("/v1/conversations/%d/messages/%d", f.removedSeq), map[string]string{"clientMsgId": "7d8f1a52-0000-4000-8000-000000000005", "body": "y"},
				gp(pathf(`,"seq":%d,"clientMsgId":"7d8f1a52-0000-4000-8000-000000000006","body":"y"`, f.removedSeq))),
			isBlocked(dirp("/v1/conversations/%d/messages/%d", f.blockedSeq), map[string]string{"clientMsgId": "7d8f1a52-0000-4000-8000-000000000007", "body": "y"},
				dirp(`{"conversationId":%d,"seq":%d,"clientMsgId":"7d8f1a52-0000-4000-8000-000000000008","body":"y"}`, f.blockedSeq))),
		// A recall of one's own message stays allowed to the blocked
		// (docs/http.md, errors): no blocked knock here.
		"DELETE /v1/conversations/{id}/messages/{seq}": notMember(msg("/v1/conversations/%d/messages/%d", f.removedSeq), nil,
			gp(pathf(`,"seq":%d,"clientMsgId":"7d8f1a52-0000-4000-8000-000000000009"`, f.removedSeq))),
		"PUT /v1/conversations/{id}/messages/{seq}/reactions/{emoji}": append(
			notMember(conv("/v1/conversations/%d/messages/1/reactions/")+thumbsUp, nil,
				gp(`,"seq":1,"clientMsgId":"7d8f1a52-0000-4000-8000-00000000000a","emoji":"👍","on":true`)),
			isBlocked(dirp("/v1/conversations/%d/messages/1/reactions/")+thumbsUp, nil,
				dirp(`{"conversationId":%d,"seq":1,"clientMsgId":"7d8f1a52-0000-4000-8000-00000000000b","emoji":"👍","on":true}`))),
		"DELETE /v1/conversations/{id}/messages/{seq}/reactions/{emoji}": append(
			notMember(conv("/v1/conversations/%d/messages/1/reactions/")+thumbsUp, nil,
				gp(`,"seq":1,"clientMsgId":"7d8f1a52-0000-4000-8000-00000000000c","emoji":"👍","on":false`)),
			isBlocked(dirp("/v1/conversations/%d/messages/1/reactions/")+thumbsUp, nil,
				dirp(`{"conversationId":%d,"seq":1,"clientMsgId":"7d8f1a52-0000-4000-8000-00000000000d","emoji":"👍","on":false}`))),
		"POST /v1/conversations/{id}/read":               notMember(conv("/v1/conversations/%d/read"), map[string]int{"seq": 1}, gp(`,"seq":1`)),
		"GET /v1/conversations/{id}/messages/{seq}/seen": notMember(msg("/v1/conversations/%d/messages/%d/seen", 1), nil, gp(`,"seq":1`)),
		"GET /v1/inbox":               every("/v1/inbox", nil, `{}`, http.StatusOK, ""),
		"GET /v1/users/{id}/presence": every(pathf("/v1/users/%d/presence", gOwner), nil, pathf(`{"userId":%d}`, gOwner), http.StatusNotFound, "not_found"),
		"POST /v1/uploads": append(
			notMember("/v1/uploads", map[string]any{"conversationId": g, "name": "a.jpg", "contentType": "image/jpeg", "size": 100},
				gp(`,"name":"a.jpg","contentType":"image/jpeg","size":100`)),
			isBlocked("/v1/uploads", map[string]any{"conversationId": dir, "name": "a.jpg", "contentType": "image/jpeg", "size": 100},
				dirp(`{"conversationId":%d,"name":"a.jpg","contentType":"image/jpeg","size":100}`))),
		// Another's upload is not found, for a member too.
		"GET /v1/uploads/{id}": append(every("/v1/uploads/"+f.upload, nil, `{"uploadId":"`+f.upload+`"}`, http.StatusNotFound, "not_found"),
			knock{who: "a member, another's upload", user: gMember, path: "/v1/uploads/" + f.upload, payload: `{"uploadId":"` + f.upload + `"}`, want: http.StatusNotFound, code: "not_found"}),
		"PUT /v1/uploads/{id}": {
			{who: "never a member, another's upload", user: stranger, path: "/v1/uploads/" + f.upload, body: mediatest.JPEG(64, 48), opts: []reqOpt{jpeg}, want: http.StatusNotFound, code: "not_found"},
			{who: "a member, another's upload", user: gMember, path: "/v1/uploads/" + f.upload, body: mediatest.JPEG(64, 48), opts: []reqOpt{jpeg}, want: http.StatusNotFound, code: "not_found"},
		},
		"POST /v1/uploads/{id}/complete": append(every("/v1/uploads/"+f.upload+"/complete", nil, `{"uploadId":"`+f.upload+`"}`, http.StatusNotFound, "not_found"),
			knock{who: "a member, another's upload", user: gMember, path: "/v1/uploads/" + f.upload + "/complete", payload: `{"uploadId":"` + f.upload + `"}`, want: http.StatusNotFound, code: "not_found"}),
		"GET /v1/attachments/{id}":            notMember("/v1/attachments/"+f.photo, nil, ""),
		"GET /v1/attachments/{id}/thumbnail":  notMember("/v1/attachments/"+f.photo+"/thumbnail", nil, ""),
		"PUT /v1/conversations/{id}/settings": notMember(conv("/v1/conversations/%d/settings"), map[string]bool{"muted": true}, gp(`,"muted":true`)),
		"POST /v1/devices":                    {
			// A token registered again moves its device to the caller
			// (the phone changed hands, docs/http.md): that is the rule,
			// so the door here is that the answer tells nothing of the
			// previous owner; it is a write, so no nothing-stored check.
		},
		"GET /v1/devices": every("/v1/devices", nil, `{}`, http.StatusOK, ""),
		"DELETE /v1/devices/{id}": append(every(pathf("/v1/devices/%d", f.device), nil, pathf(`{"id":%d}`, f.device), http.StatusNotFound, "not_found"),
			knock{who: "a member, another's device", user: gMember, path: pathf("/v1/devices/%d", f.device), payload: pathf(`{"id":%d}`, f.device), want: http.StatusNotFound, code: "not_found"}),
		"GET /v1/push/vapid": nil,
		"GET /v1/me":         nil,
		// An avatar naming another's upload or attachment: unknown.
		"PUT /v1/me": {
			{who: "never a member, another's upload", user: stranger, path: "/v1/me", body: map[string]string{"displayName": "x", "avatarUploadId": f.upload},
				payload: `{"displayName":"x","avatarUploadId":"` + f.upload + `"}`, want: http.StatusNotFound, code: "not_found"},
			{who: "a member, another's attachment", user: gMember, path: "/v1/me", body: map[string]string{"displayName": "x", "avatarUploadId": f.photo},
				payload: `{"displayName":"x","avatarUploadId":"` + f.photo + `"}`, want: http.StatusNotFound, code: "not_found"},
		},
		"GET /v1/me/settings":           nil,
		"PUT /v1/me/settings":           nil,
		"POST /v1/me/tokens/revoke":     nil,
		"GET /v1/me/blocks":             nil,
		"PUT /v1/me/blocks/{userId}":    nil,
		"DELETE /v1/me/blocks/{userId}": nil,
		"GET /v1/users":                 every(pathf("/v1/users?ids=%d", gOwner), nil, pathf(`{"ids":[%d]}`, gOwner), http.StatusOK, ""),
		"GET /v1/users/{id}":            every(pathf("/v1/users/%d", gOwner), nil, pathf(`{"userId":%d}`, gOwner), http.StatusNotFound, "not_found"),
		"PATCH /v1/conversations/{id}": append(notMember(conv("/v1/conversations/%d"), map[string]string{"title": "mine now"}, gp(`,"title":"mine now"`)),
			knock{who: "an owner, another's upload as the avatar", user: gMember, path: pathf("/v1/conversations/%d", f.mine), body: map[string]string{"avatarUploadId": f.upload},
				payload: pathf(`{"conversationId":%d,"avatarUploadId":"%s"}`, f.mine, f.upload), want: http.StatusNotFound, code: "not_found"}),
		"GET /v1/conversations/{id}/members": notMember(conv("/v1/conversations/%d/members"), nil, gp("")),
		"PUT /v1/conversations/{id}/members/{userId}/role": notMember(msg("/v1/conversations/%d/members/%d/role", gMember), map[string]string{"role": "admin"},
			gp(pathf(`,"userId":%d,"role":"admin"`, gMember))),
		"POST /v1/conversations/{id}/owner": append(
			notMember(conv("/v1/conversations/%d/owner"), map[string]int64{"userId": gMember}, gp(pathf(`,"userId":%d`, gMember))),
			notMember(conv("/v1/conversations/%d/owner"), map[string]int64{"userId": gRemoved}, gp(pathf(`,"userId":%d`, gRemoved)))...),
		"GET /v1/search": append(
			every("/v1/search?q=secret", nil, `{"q":"secret"}`, http.StatusOK, ""),
			notMember(conv("/v1/search?q=secret&conversationId=%d"), nil, gp(`,"q":"secret"`))...),
		"GET /healthz": nil,
		"GET /readyz":  nil,
	}
	// A member who joined after it all: what came before their join does
	// not exist for them (404, a reply to it 400 as to no message), and
	// their pages and searches hold none of it.
	lk := func(path string, body any, payload string, want int, code string) knock {
		return knock{who: "joined later", user: late, path: path, body: body, payload: payload, want: want, code: code}
	}
	for key, ks := range map[string][]knock{
		"POST /v1/conversations/{id}/messages": {
			f.intoOwn(late, "forward from before their join", pathf(`"forward":{"conversationId":%d,"seq":1}`, g), http.StatusNotFound, "not_found"),
			lk(conv("/v1/conversations/%d/messages"), pathf(`{"clientMsgId":"%s","forward":{"conversationId":%d,"seq":1}}`, newID(), g),
				gp(pathf(`,"clientMsgId":"%s","forward":{"conversationId":%d,"seq":1}`, newID(), g)), http.StatusNotFound, "not_found"),
			lk(conv("/v1/conversations/%d/messages"), pathf(`{"clientMsgId":"%s","body":"re","replyTo":1}`, newID()),
				gp(pathf(`,"clientMsgId":"%s","body":"re","replyTo":1`, newID())), http.StatusBadRequest, "invalid"),
		},
		"GET /v1/conversations/{id}/messages": {
			lk(conv("/v1/conversations/%d/messages?afterSeq=0"), nil, gp(`,"afterSeq":0`), http.StatusOK, ""),
			lk(conv("/v1/conversations/%d/messages"), nil, gp(""), http.StatusOK, ""),
		},
		"PATCH /v1/conversations/{id}/messages/{seq}": {
			lk(conv("/v1/conversations/%d/messages/1"), pathf(`{"clientMsgId":"%s","body":"y"}`, newID()),
				gp(pathf(`,"seq":1,"clientMsgId":"%s","body":"y"`, newID())), http.StatusNotFound, "not_found"),
		},
		"DELETE /v1/conversations/{id}/messages/{seq}": {
			lk(conv("/v1/conversations/%d/messages/1"), nil, gp(pathf(`,"seq":1,"clientMsgId":"%s"`, newID())), http.StatusNotFound, "not_found"),
		},
		"PUT /v1/conversations/{id}/messages/{seq}/reactions/{emoji}": {
			lk(conv("/v1/conversations/%d/messages/1/reactions/")+thumbsUp, nil,
				gp(pathf(`,"seq":1,"clientMsgId":"%s","emoji":"👍","on":true`, newID())), http.StatusNotFound, "not_found"),
		},
		"DELETE /v1/conversations/{id}/messages/{seq}/reactions/{emoji}": {
			lk(conv("/v1/conversations/%d/messages/1/reactions/")+thumbsUp, nil,
				gp(pathf(`,"seq":1,"clientMsgId":"%s","emoji":"👍","on":false`, newID())), http.StatusNotFound, "not_found"),
		},
		"GET /v1/conversations/{id}/messages/{seq}/seen": {
			lk(conv("/v1/conversations/%d/messages/1/seen"), nil, gp(`,"seq":1`), http.StatusNotFound, "not_found"),
		},
		"GET /v1/attachments/{id}":           {lk("/v1/attachments/"+f.photo, nil, "", http.StatusNotFound, "not_found")},
		"GET /v1/attachments/{id}/thumbnail": {lk("/v1/attachments/"+f.photo+"/thumbnail", nil, "", http.StatusNotFound, "not_found")},
		"GET /v1/search": {
			lk("/v1/search?q=secret", nil, `{"q":"secret"}`, http.StatusOK, ""),
			lk(conv("/v1/search?q=secret&conversationId=%d"), nil, gp(`,"q":"secret"`), http.StatusOK, ""),
		},
	} {
		if _, ok := doors[key]; !ok {
			t.Fatalf("knocks of a late member on %s, which the table does not classify", key)
		}
		doors[key] = append(doors[key], ks...)
	}

	// The routes whose table entry is nil name nothing of anyone else's:
	// the caller's own profile, settings, blocks (blocking anyone is the
	// caller's right, and says nothing of them) and tokens, the server's
	// key and the probes. POST /v1/devices is covered below.

	// The same doors opened by whom they are for show the secret, so
	// its absence above means something.
	for _, c := range []struct {
		user int64
		path string
	}{
		{gMember, conv("/v1/conversations/%d")},
		{gMember, conv("/v1/conversations/%d/messages")},
		{gMember, "/v1/inbox"},
		{gMember, "/v1/search?q=secret"},
		{gMember, pathf("/v1/users?ids=%d", gOwner)},
		{gMember, pathf("/v1/users/%d", gOwner)},
		{gOwner, "/v1/devices"},
		{blocked, dirp("/v1/conversations/%d/messages")},
	} {
		if r := f.do(c.user, "GET", c.path, nil); r.status != http.StatusOK || !strings.Contains(string(r.body), secret) {
			t.Errorf("control: GET %s by %d: %d %s, want 200 with the secret", c.path, c.user, r.status, truncate(r.body))
		}
	}
	for _, c := range []struct {
		user int64
		path string
	}{{gMember, "/v1/attachments/" + f.photo}, {gMember, "/v1/attachments/" + f.photo + "/thumbnail"}, {gOwner, "/v1/uploads/" + f.upload}} {
		if r := f.do(c.user, "GET", c.path, nil); r.status != http.StatusOK {
			t.Errorf("control: GET %s by %d: %d, want 200", c.path, c.user, r.status)
		}
	}
	before := f.state()
	f.must(http.StatusOK, gMember, "POST", conv("/v1/conversations/%d/read"), map[string]int{"seq": 2}, nil)
	if len(changed(before, f.state())) == 0 {
		t.Error("control: a member's read receipt changes no table: the digest sees nothing")
	}

	seen := map[string]bool{}
	rpcKnocked := map[string]bool{}
	for _, r := range httpapi.Routes() {
		key := r.Method + " " + r.Path
		seen[key] = true
		knocks, ok := doors[key]
		if !ok {
			t.Errorf("route %s is not classified: add its outsider knocks (or nil with the reason) to this test", key)
			continue
		}
		for _, k := range knocks {
			f.try(t, r, k)
			if r.RPC != "" && k.payload != "" {
				rpcKnocked[r.RPC] = true
			}
		}
	}
	for key := range doors {
		if !seen[key] {
			t.Errorf("the table classifies %s, which is no route", key)
		}
	}
	for _, r := range httpapi.Routes() {
		if r.RPC != "" && len(doors[r.Method+" "+r.Path]) > 0 && !rpcKnocked[r.RPC] {
			t.Errorf("RPC %s (%s %s) is knocked on over HTTP only", r.RPC, r.Method, r.Path)
		}
	}

	// The removed sender's resend answers their message's seq, not one
	// of the conversation since.
	var rep httpapi.SendReply
	f.must(http.StatusOK, gRemoved, "POST", conv("/v1/conversations/%d/messages"), map[string]string{"clientMsgId": f.removedMsg, "body": "mine"}, &rep)
	if rep.Seq != f.removedSeq {
		t.Errorf("the removed sender's resend answers seq %d, want their message's %d", rep.Seq, f.removedSeq)
	}

	// A device token registered again moves to the caller, and the answer
	// says nothing of whose it was.
	r := f.do(stranger, "POST", "/v1/devices", map[string]string{"platform": "fcm", "token": secret + "-token"})
	if r.status != http.StatusOK || strings.Contains(string(r.body), secret) || strings.Contains(string(r.body), "userId") {
		t.Errorf("POST /v1/devices of another's token: %d %s, want 200 with the id alone", r.status, r.body)
	}
}

// intoOwn is a send by user into their own conversation with pal, whose
// fields beyond clientMsgId are fields (JSON), naming something of g's or
// another user's.
func (f doorFixture) intoOwn(user int64, what, fields string, want int, code string) knock {
	c := f.own[user]
	return knock{who: fmt.Sprintf("user %d, %s into their own conversation", user, what), user: user,
		path:    pathf("/v1/conversations/%d/messages", c),
		body:    `{"clientMsgId":"` + newID() + `",` + fields + `}`,
		payload: pathf(`{"conversationId":%d,"clientMsgId":"%s",%s}`, c, newID(), fields),
		want:    want, code: code}
}

// try makes k's request over HTTP and, when the route has an RPC twin and
// k a payload, over RPC, and checks each answer and that the database is
// as before.
func (f doorFixture) try(t *testing.T, r httpapi.Route, k knock) {
	t.Helper()
	name := r.Method + " " + k.path + " by " + k.who
	before := f.state()
	res := f.do(k.user, r.Method, k.path, k.body, k.opts...)
	checkAnswer(t, name, res.status, res.errorCode(), res.body, k)
	if n := changed(before, f.state()); len(n) > 0 {
		t.Errorf("%s: tables %v changed", name, n)
	}
	if r.RPC == "" || k.payload == "" {
		return
	}
	name = "RPC " + r.RPC + " " + k.payload + " by " + k.who
	before = f.state()
	rr := f.rpc(k.user, r.RPC, k.payload)
	checkAnswer(t, name, rr.status, rr.code, rr.withoutStatusJSON(t), k)
	if n := changed(before, f.state()); len(n) > 0 {
		t.Errorf("%s: tables %v changed", name, n)
	}
}

// checkAnswer: the status and code k wants; a refusal's body is the error
// alone; no answer holds the secret.
func checkAnswer(t *testing.T, name string, status int, code string, body []byte, k knock) {
	t.Helper()
	if status != k.want || code != k.code {
		t.Errorf("%s: %d %q, want %d %q; body %s", name, status, code, k.want, k.code, truncate(body))
	}
	if strings.Contains(strings.ToUpper(string(body)), secret) {
		t.Errorf("%s: the answer tells the conversation's text: %s", name, truncate(body))
	}
	if k.code == "" {
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Errorf("%s: refusal %s is no JSON object: %v", name, truncate(body), err)
		return
	}
	for key := range m {
		if key != "error" {
			t.Errorf("%s: refusal carries %q besides the error: %s", name, key, truncate(body))
		}
	}
}

// withoutStatusJSON is the reply minus "status", as JSON.
func (r rpcReply) withoutStatusJSON(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(r.withoutStatus(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
