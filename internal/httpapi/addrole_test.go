package httpapi_test

import (
	"net/http"
	"testing"
)

// members.add takes a role, "admin" the owner's to give; adding someone
// already a member answers them as they are (200): the add changes no
// role (docs/http.md).
func TestAnAddOfAMemberAlreadyInChangesNoRole(t *testing.T) {
	e := newEnv(t)
	g := e.group(owner, member)
	p := pathf("/v1/conversations/%d/members", g)
	var m struct{ Role string }
	e.must(http.StatusCreated, owner, "POST", p, `{"userId":5,"role":"admin"}`, &m)
	if m.Role != "admin" {
		t.Fatalf("added as admin: role %q", m.Role)
	}
	e.must(http.StatusOK, owner, "POST", p, `{"userId":2,"role":"admin"}`, &m)
	if m.Role != "member" {
		t.Fatalf("a member added again as admin: role %q, want member (unchanged)", m.Role)
	}
	e.must(http.StatusOK, owner, "POST", p, `{"userId":5,"role":"member"}`, &m)
	if m.Role != "admin" {
		t.Fatalf("an admin added again as member: role %q, want admin (unchanged)", m.Role)
	}
	e.promote(g, member)
	if r := e.do(member, "POST", p, `{"userId":7,"role":"admin"}`); r.status != http.StatusForbidden || r.errorCode() != "forbidden" {
		t.Fatalf("an admin adding an admin: %d %s, want 403 forbidden", r.status, r.body)
	}
	e.must(http.StatusCreated, member, "POST", p, `{"userId":7}`, &m)
	if m.Role != "member" {
		t.Fatalf("an admin's add: role %q, want member", m.Role)
	}
}
