package web

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/blob/s3fake"
)

// objectStoreSpec needs chatd on an object store (an in-process fake S3),
// so it runs against a chatd of its own.
const objectStoreSpec = "objectstore.spec.mjs"

// objectStoreFileBytes is the size of the file the spec uploads; the day's
// byte quota of its chatd (objectStoreQuota) takes it once, not twice, so a
// second ticket for it is refused 429 as the day's bytes.
const (
	objectStoreFileBytes = 40000
	objectStoreQuota     = 60000
)

// TestBrowserUploadWhoseCompletionWasLostIsCompletedNotSentAgain runs
// web/e2e/objectstore.spec.mjs in headless Chromium against a chatd whose
// attachments go to an object store (s3fake), its upload URLs valid a
// minute: a file whose bytes the store took, but whose completion never
// reached chatd (the network cut it), is completed by the tray's Retry,
// before its URL expired or after, its bytes sent to the store once and
// charged once against the day's bytes; a page reloaded before the
// completion was answered completes that upload when the file is picked
// again, likewise; and a file whose bytes never reached the store is sent
// again.
func TestBrowserUploadWhoseCompletionWasLostIsCompletedNotSentAgain(t *testing.T) {
	t.Parallel()
	chromium, node := browserTools(t)
	fake, err := s3fake.Start("chatd-web")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	base := startChatd(t, buildChatd(t),
		"CHAT_S3_ENDPOINT="+fake.Endpoint(), "CHAT_S3_BUCKET="+fake.Bucket, "CHAT_S3_REGION="+fake.Region,
		"CHAT_S3_ACCESS_KEY="+fake.AccessKey, "CHAT_S3_SECRET_KEY="+fake.SecretKey, "CHAT_S3_USE_TLS=false",
		"CHAT_UPLOAD_URL_EXPIRY=1m", "CHAT_UPLOAD_BYTES_PER_DAY="+strconv.Itoa(objectStoreQuota))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", objectStoreSpec), "e2e "+objectStoreSpec+": ",
		"CHATD_URL="+base, "CHROMIUM_PATH="+chromium, "S3_URL=http://"+fake.Endpoint(),
		"FILE_BYTES="+strconv.Itoa(objectStoreFileBytes), "QUOTA_BYTES="+strconv.Itoa(objectStoreQuota)); err != nil {
		t.Fatalf("browser test %s failed: %v", objectStoreSpec, err)
	}
}
