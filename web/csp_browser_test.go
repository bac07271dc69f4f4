package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testcert"
	"github.com/chatd/chatd/internal/testkit"
)

// cspSpec probes the page's policy with WebSockets to other hosts, whose
// refusals the other specs sharing TestBrowserE2E's chatd would not expect.
const cspSpec = "csp.spec.mjs"

// TestTheWebClientChatsUnderItsPolicyAndReachesNoOtherWebSocketHost runs
// web/e2e/csp.spec.mjs in headless Chromium, over http_addr (ws:) and
// https_addr (wss:): connect-src names the page's own origin, which covers
// its MQTT WebSocket, and no other WebSocket host; Permissions-Policy
// denies the page the camera, the microphone and the location.
func TestTheWebClientChatsUnderItsPolicyAndReachesNoOtherWebSocketHost(t *testing.T) {
	t.Parallel()
	chromium, node := browserTools(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM, keyPEM := testcert.SelfSigned(t, "127.0.0.1")
	testcert.WriteFiles(t, cert, key, certPEM, keyPEM)
	httpsAddr := testkit.FreeAddr(t)
	base := startChatd(t, buildChatd(t), "CHAT_HTTPS_ADDR="+httpsAddr, "CHAT_TLS_CERT="+cert, "CHAT_TLS_KEY="+key)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", cspSpec), "e2e "+cspSpec+": ",
		"CHATD_URL="+base, "CHATD_HTTPS_URL=https://"+httpsAddr, "CHROMIUM_PATH="+chromium); err != nil {
		t.Fatalf("browser test %s failed: %v", cspSpec, err)
	}
}
