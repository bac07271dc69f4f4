package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestADeviceAppIDWithAControlCharacterIsRefusedInTheAPIsWords: an appId
// with NUL (which PostgreSQL text cannot hold) or another control
// character is 400 invalid saying what appId may be, over HTTP and RPC,
// and stores no device; before, NUL reached the database and the answer
// was its error ("register device: invalid byte sequence for encoding
// "UTF8": 0x00").
func TestADeviceAppIDWithAControlCharacterIsRefusedInTheAPIsWords(t *testing.T) {
	e, _ := newPushEnv(t)
	for _, appID := range []string{`a\u0000b`, `com.example\nchat`, `\u007f`} {
		body := `{"platform":"fcm","token":"tok","appId":"` + appID + `"}`
		r := e.do(1, "POST", "/v1/devices", body)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid" || !strings.Contains(string(r.body), "appId") {
			t.Errorf("POST appId %s: %d %s, want 400 invalid about appId", appID, r.status, truncate(r.body))
		}
		rr := e.rpc(1, "device.register", body)
		if rr.status != http.StatusBadRequest || rr.code != "invalid" || !strings.Contains(string(rr.raw), "appId") {
			t.Errorf("RPC appId %s: %s, want 400 invalid about appId", appID, rr.raw)
		}
	}
	if n := e.devices(1); n != 0 {
		t.Fatalf("%d devices stored", n)
	}
	e.must(http.StatusCreated, 1, "POST", "/v1/devices", `{"platform":"fcm","token":"tok","appId":"com.example.chat"}`, nil)
}
