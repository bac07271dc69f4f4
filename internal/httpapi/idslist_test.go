package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAUserIdListTakesCanonicalIdsOnly: the ids of GET /v1/users?ids=
// are spelt as path ids are, plain decimal digits (docs/http.md). A "+"
// in a query is a space, and the list's ids were trimmed, so "?ids=+1"
// read as user 1 and "?ids=1,%202" as users 1 and 2: they are 400
// invalid naming the parameter, as "?ids=a" is.
func TestAUserIdListTakesCanonicalIdsOnly(t *testing.T) {
	e := newEnv(t)
	e.group(1, 2)
	for _, q := range []string{"ids=+1", "ids=1,+2", "ids=%201", "ids=1,%202", "ids=1%20", "ids=1,2%09", "ids=01"} {
		r := e.do(2, "GET", "/v1/users?"+q, nil)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "ids") {
			t.Errorf("GET /v1/users?%s: %d %s, want 400 invalid naming ids", q, r.status, truncate(r.body))
		}
	}
	e.must(http.StatusOK, 2, "GET", "/v1/users?ids=1,2", nil, nil)
}
