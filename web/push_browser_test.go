package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/webpushtest"
)

// pushSpec needs a loopback push service, so TestBrowserE2E leaves it out.
const pushSpec = "push.spec.mjs"

// ownTest lists the specs a test of their own runs; TestBrowserE2E skips them.
var ownTest = map[string]bool{pushSpec: true, peopleSpec: true, packetSpec: true, pubackSpec: true, earlySpec: true, outboxSpec: true, wakeSpec: true}

// TestBrowserPush runs web/e2e/push.spec.mjs: the notification button, the
// service worker's subscription registered with POST /v1/devices, chatd's
// encrypted push decrypted by a loopback push service with the
// subscription's keys, the notification and its click.
func TestBrowserPush(t *testing.T) {
	chromium, node := browserTools(t)
	keys, err := push.LoadOrCreateVAPID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ep := webpushtest.NewEndpoint(keys.Public)
	t.Cleanup(ep.Close)
	endpoint, sub := ep.Subscribe("browser")

	base := startChatd(t, buildChatd(t), "CHAT_VAPID_PRIVATE_KEY="+keys.Private, "CHAT_PUSH_ALLOW_HTTP=true", "CHAT_PUSH_DELAY=1s",
		"CHAT_PUSH_MIN_INTERVAL=1s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err = runSpec(ctx, t, node, filepath.Join("e2e", pushSpec), "push e2e: ",
		"CHATD_URL="+base,
		"CHROMIUM_PATH="+chromium,
		"PUSH_ENDPOINT="+endpoint,
		"PUSH_P256DH="+sub.P256dh(),
		"PUSH_AUTH="+sub.AuthB64(),
		"PUSH_LOG="+ep.Server.URL+"/log/browser",
	)
	if err != nil {
		t.Fatalf("push browser test failed: %v\n%s", err, describePushes(ep))
	}
}

func describePushes(ep *webpushtest.Endpoint) string {
	s := "requests at the loopback push service:"
	for _, p := range ep.Pushes() {
		s += "\n  " + p.Path + " " + p.At.Format(time.RFC3339Nano) + " " + string(p.Plaintext)
		if p.Err != nil {
			s += " error: " + p.Err.Error()
		}
	}
	return s
}
