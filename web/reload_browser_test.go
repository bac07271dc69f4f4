package web

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// reloadSpec needs a chatd whose day's byte quota takes its file once.
const reloadSpec = "reload.spec.mjs"

// reloadFileBytes is the size of the file the spec uploads; the day's byte
// quota of its chatd (reloadQuota) takes it once, not twice, so a second
// ticket for it is refused 429 as the day's bytes.
const (
	reloadFileBytes = 40000
	reloadQuota     = 60000
)

// TestBrowserUploadInterruptedByAReloadIsResumedWhenTheFileIsPickedAgain
// runs web/e2e/reload.spec.mjs in headless Chromium: a page reloaded while
// it PUT a file (the bytes on their way, or at chatd with the answer not
// back) shows the upload after the reload, and the same file picked again
// goes on with that upload, its ticket asked for once and charged once
// against the day's bytes; an upload removed after the reload is
// forgotten; the same file picked in a second tab of the user while the
// first still uploads it is an upload of its own (both sent), the second
// tab's tray showing only uploads no live tab holds, and the first's
// resumes in another tab once it is closed.
func TestBrowserUploadInterruptedByAReloadIsResumedWhenTheFileIsPickedAgain(t *testing.T) {
	t.Parallel()
	chromium, node := browserTools(t)
	base := startChatd(t, buildChatd(t), "CHAT_UPLOAD_BYTES_PER_DAY="+strconv.Itoa(reloadQuota))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", reloadSpec), "e2e "+reloadSpec+": ",
		"CHATD_URL="+base, "CHROMIUM_PATH="+chromium,
		"FILE_BYTES="+strconv.Itoa(reloadFileBytes), "QUOTA_BYTES="+strconv.Itoa(reloadQuota)); err != nil {
		t.Fatalf("browser test %s failed: %v", reloadSpec, err)
	}
}
