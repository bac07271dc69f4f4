package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestARefusalQuotesALongFieldOrParameterNameShort: an unknown field, a
// field given twice or an unknown query parameter is named in the 400,
// clipped: a name as long as the body or URL allows does not come back
// whole (before, a 100,000-byte name did), over HTTP and RPC.
func TestARefusalQuotesALongFieldOrParameterNameShort(t *testing.T) {
	e := newEnv(t)
	g := e.group(1, 2)
	name := strings.Repeat("k", 100000)
	read := pathf("/v1/conversations/%d/read", g)
	for what, r := range map[string]resp{
		"unknown field":     e.do(1, "POST", read, `{"seq":1,"`+name+`":1}`),
		"field given twice": e.do(1, "POST", read, `{"seq":1,"`+name[:70000]+`":1,"`+name[:70000]+`":1}`),
		"unknown parameter": e.do(1, "GET", "/v1/inbox?"+name[:60000]+"=1", nil),
	} {
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || len(r.body) > 512 {
			t.Errorf("%s: %d, a %d-byte answer %.120s", what, r.status, len(r.body), r.body)
		}
	}
	rr := e.rpc(1, "read", pathf(`{"conversationId":%d,"seq":1,"%s":1}`, g, name))
	if rr.status != http.StatusBadRequest || rr.code != "invalid" || len(rr.raw) > 512 {
		t.Errorf("RPC unknown field: a %d-byte reply %.120s", len(rr.raw), rr.raw)
	}
}
