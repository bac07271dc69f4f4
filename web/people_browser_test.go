package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// peopleSpec runs against a chatd of its own (its screenshots are checked).
const peopleSpec = "people.spec.mjs"

// TestBrowserPeopleE2E runs web/e2e/people.spec.mjs (profiles and names,
// the group info panel, privacy settings, search that jumps to the hit) in
// headless Chromium against a chatd of its own, and takes the screenshots
// profile.png, group-info.png and search.png (screenshotDir).
func TestBrowserPeopleE2E(t *testing.T) {
	t.Parallel()
	chromium, node := browserTools(t)
	base := startChatd(t, buildChatd(t))
	shots := screenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", peopleSpec), "e2e people: ", "CHATD_URL="+base, "CHROMIUM_PATH="+chromium, "SCREENSHOT_DIR="+shots); err != nil {
		t.Fatalf("browser tests failed: %v", err)
	}
	wantScreenshots(t, shots, "profile.png", "group-info.png", "search.png")
}
