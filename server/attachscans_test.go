package server_test

import (
	"context"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestAJPEGOfThousandsOfScansIsSentWithoutAThumbnail: each scan of a
// progressive JPEG, a few bytes, has the decoder walk the whole picture
// again; 2000 of them over a megapixel (26 KB) took a thumbnail worker
// seconds, over 50 megapixels hours. The photo is sent and shown without
// a thumbnail, its scans past the 100th never decoded.
func TestAJPEGOfThousandsOfScansIsSentWithoutAThumbnail(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	up := n.upload(t, 1, g.ID, "scans.jpg", "image/jpeg", mediatest.ScanBomb(1024, 1024, 2000))
	if state := n.thumbOutcome(t, up.UploadID); state != "failed" {
		t.Errorf("a JPEG of 2000 scans: thumbnail %s, want failed (none made)", state)
	}
}
