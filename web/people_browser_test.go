package web

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// peopleSpec runs against a chatd of its own (its screenshots are checked).
const peopleSpec = "people.spec.mjs"

// TestBrowserPeopleE2E runs web/e2e/people.spec.mjs (profiles and names,
// the group info panel, privacy settings, search that jumps to the hit) in
// headless Chromium against a chatd of its own, and writes
// docs/images/{profile,group-info,search}.png.
func TestBrowserPeopleE2E(t *testing.T) {
	chromium := requireTool(t, "Chromium", os.Getenv("CHROMIUM_PATH"), "/usr/bin/chromium", "chromium")
	node := requireNode(t)
	ensureNodeModules(t)
	if testing.Short() {
		t.Skip("-short: not starting chatd and a browser")
	}
	base := startChatd(t, buildChatd(t))
	shots, err := filepath.Abs(filepath.Join("..", "docs", "images"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test-reporter=spec", filepath.Join("e2e", peopleSpec))
	cmd.Env = append(os.Environ(), "CHATD_URL="+base, "CHROMIUM_PATH="+chromium, "SCREENSHOT_DIR="+shots,
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	cmd.WaitDelay = 10 * time.Second
	w := &lineLogger{t: t, prefix: "e2e people: "}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	w.Flush()
	if err != nil {
		t.Fatalf("browser tests failed: %v", err)
	}
	for _, f := range []string{"profile.png", "group-info.png", "search.png"} {
		if fi, err := os.Stat(filepath.Join(shots, f)); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s not written: %v", f, err)
		}
	}
}
