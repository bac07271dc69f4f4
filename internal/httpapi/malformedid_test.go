package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/httpapi"
)

// TestEveryRouteRefusesAMalformedPathIDAsInvalid: an id in a path that
// is not of the shape chatd hands out (a number in canonical decimal, an
// upload's or attachment's 26 characters a-z, 2-7) is 400 invalid on
// every route that takes one, the attachment downloads included, which
// answered 404 as for a file that does not exist: a client that built the
// path wrong is told so, not that the file is gone.
func TestEveryRouteRefusesAMalformedPathIDAsInvalid(t *testing.T) {
	e := newEnv(t)
	e.withAttachments()
	g := e.group(owner, member)
	m := e.sendMsg(owner, g, newID(), "hi")
	param := regexp.MustCompile(`\{[A-Za-z]+\}`)
	for _, r := range httpapi.Routes() {
		params := param.FindAllString(r.Path, -1)
		for i, p := range params {
			if p == "{emoji}" {
				continue // not an id: any emoji, path-escaped
			}
			// Every other parameter well formed (and naming what
			// exists), this one not.
			n := 0
			path := param.ReplaceAllStringFunc(r.Path, func(q string) string {
				defer func() { n++ }()
				stringID := strings.HasPrefix(r.Path, "/v1/uploads/") || strings.HasPrefix(r.Path, "/v1/attachments/")
				switch {
				case n == i && stringID:
					return "Not-An-Upload-Id"
				case n == i:
					return "x1"
				case q == "{emoji}":
					return "ok"
				case q == "{seq}":
					return pathf("%d", m.Seq)
				case q == "{id}" && strings.HasPrefix(r.Path, "/v1/conversations/"):
					return pathf("%d", g)
				}
				return pathf("%d", member)
			})
			res := e.do(owner, r.Method, path, nil)
			if res.status != http.StatusBadRequest || res.errorCode() != "invalid" {
				t.Errorf("%s %s (%s malformed): %d %s, want 400 invalid", r.Method, path, p, res.status, truncate(res.body))
			}
		}
	}
}
