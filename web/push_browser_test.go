package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/webpushtest"
)

// pushSpec needs a loopback push service, so TestBrowserE2E leaves it out.
const pushSpec = "push.spec.mjs"

// ownTest lists the specs a test of their own runs; TestBrowserE2E skips them.
var ownTest = map[string]bool{pushSpec: true, peopleSpec: true, packetSpec: true, pubackSpec: true, earlySpec: true, outboxSpec: true, wakeSpec: true, unopenedSpec: true, cspSpec: true, objectStoreSpec: true, clientIDSpec: true, reloadSpec: true}

// TestBrowserPush runs web/e2e/push.spec.mjs: the notification button, the
// service worker's subscription registered with POST /v1/devices, chatd's
// encrypted push decrypted by a loopback push service with the
// subscription's keys, the notification and its click.
func TestBrowserPush(t *testing.T) {
	t.Parallel()
	chromium, node := browserTools(t)
	keys, err := push.LoadOrCreateVAPID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ep := webpushtest.NewEndpoint(keys.Public)
	t.Cleanup(ep.Close)
	endpoint, sub := ep.Subscribe("browser")

	base, dbURL := startChatdDB(t, buildChatd(t), "CHAT_VAPID_PRIVATE_KEY="+keys.Private, "CHAT_PUSH_ALLOW_HTTP=true", "CHAT_PUSH_DELAY=1s",
		"CHAT_PUSH_MIN_INTERVAL=1s", "CHAT_PRESENCE_GRACE=100ms")
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
		t.Fatalf("push browser test failed: %v\n%s\n%s\n%s", err, describePushes(ep), pushState(dbURL), pushMetrics(base))
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

// pushState is what chatd's database says about the push decisions: the
// devices, each conversation's decided position against its stream, the
// jobs, and each member's watermarks.
func pushState(dbURL string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "push state: " + err.Error()
	}
	defer conn.Close(ctx)
	var b strings.Builder
	for _, q := range []string{
		`SELECT id, user_id, platform, created_at FROM push_device ORDER BY id`,
		`SELECT p.conversation_id, p.seq AS decided, c.last_seq FROM push_cursor p JOIN conversation c ON c.id = p.conversation_id ORDER BY 1`,
		`SELECT conversation_id, seq, kind, sender_id, created_at, recalled_at FROM message ORDER BY conversation_id, seq`,
		`SELECT user_id, conversation_id, join_seq, last_delivered_seq, last_read_seq FROM member_watermark ORDER BY conversation_id, user_id`,
		`SELECT user_id, conversation_id, pushed_at, seq FROM push_last ORDER BY 1, 2`,
		`SELECT id, user_id, conversation_id, kind, state, seq, count, covered, not_before FROM push_job ORDER BY id`,
	} {
		fmt.Fprintf(&b, "%s\n", q)
		rows, err := conn.Query(ctx, q)
		if err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
			continue
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				fmt.Fprintf(&b, "  %v\n", err)
				break
			}
			fmt.Fprintf(&b, "  %v\n", vals)
		}
		if err := rows.Err(); err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
		}
		rows.Close()
	}
	return b.String()
}

// pushMetrics is chatd's push metrics: what it decided, sent and skipped
// (and why).
func pushMetrics(base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return "push metrics: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "push metrics: " + err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "chat_push_") && !strings.Contains(line, "_bucket{") {
			out = append(out, "  "+line)
		}
	}
	return "push metrics (" + resp.Status + "):\n" + strings.Join(out, "\n")
}
