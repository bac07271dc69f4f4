package httpapi_test

import (
	"encoding/json"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// To the user they blocked, the blocker's profile is their name alone,
// over HTTP (one user, a batch) and RPC alike; the other members, and the
// blocked user again after the unblock, read the whole profile.
func TestTheBlockersProfileShowsTheBlockedUserTheNameAloneOverHTTPAndRPC(t *testing.T) {
	e := newEnv(t)
	e.group(1, 2, 3)
	e.must(200, 1, "PUT", "/v1/me", map[string]any{"displayName": "Ann", "about": "climber", "avatarUrl": "https://img.example/a.png"}, nil)
	e.must(204, 1, "PUT", "/v1/me/blocks/2", nil, nil)
	read := func(viewer int64) map[string]chat.Profile {
		t.Helper()
		out := map[string]chat.Profile{}
		var p chat.Profile
		e.must(200, viewer, "GET", "/v1/users/1", nil, &p)
		out["GET /v1/users/1"] = p
		var users httpapi.UsersReply
		e.must(200, viewer, "GET", "/v1/users?ids=1", nil, &users)
		if len(users.Users) == 1 {
			out["GET /v1/users?ids=1"] = users.Users[0]
		}
		for method, payload := range map[string]string{"user.get": `{"userId":1}`, "users.get": `{"ids":[1]}`} {
			rr := e.rpc(viewer, method, payload)
			var one chat.Profile
			var many httpapi.UsersReply
			if rr.status != 200 || json.Unmarshal(rr.raw, &one) != nil || json.Unmarshal(rr.raw, &many) != nil {
				t.Fatalf("rpc %s by %d: %s", method, viewer, rr.raw)
			}
			if len(many.Users) == 1 {
				one = many.Users[0]
			}
			out["rpc "+method] = one
		}
		if len(out) != 4 {
			t.Fatalf("user %d read %d answers of 4: %+v", viewer, len(out), out)
		}
		return out
	}
	for how, p := range read(2) {
		if p.ID != 1 || p.DisplayName != "Ann" || p.Avatar != nil || p.About != "" {
			t.Errorf("%s by the blocked user: %+v, want the name alone", how, p)
		}
	}
	for how, p := range read(3) {
		if p.Avatar == nil || p.About != "climber" {
			t.Errorf("%s by another member: %+v, want the whole profile", how, p)
		}
	}
	e.must(204, 1, "DELETE", "/v1/me/blocks/2", nil, nil)
	for how, p := range read(2) {
		if p.Avatar == nil || p.About != "climber" {
			t.Errorf("%s after the unblock: %+v, want the whole profile", how, p)
		}
	}
}
