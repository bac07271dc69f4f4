package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAnImageWhoseThumbnailWouldTakeMoreThanTheBudgetIsShownWithoutOne:
// the thumbnailers hold at most thumbnail_workers × image_max_pixels × 4
// bytes (8 MB here), as operations.md promises. An image within the pixel
// limit whose decoding and scaling would take far more (a PNG 2 pixels
// wide and 400,000 tall: the scaler's buffers alone are 32 MB; a 16-bit
// PNG, 8 bytes a pixel) is accepted and shown without a thumbnail,
// never decoded; a photo within the budget gets its thumbnail.
func TestAnImageWhoseThumbnailWouldTakeMoreThanTheBudgetIsShownWithoutOne(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, map[string]string{"CHAT_IMAGE_MAX_PIXELS": "1000000", "CHAT_THUMBNAIL_WORKERS": "2"})
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	photo := n.upload(t, 1, g.ID, "p.jpg", "image/jpeg", mediatest.JPEG(800, 600))
	if photo.Attachment.Thumbnail == nil {
		t.Fatal("a photo within the budget got no thumbnail")
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"thin.png", mediatest.PNG(2, 400_000)},
		{"deep.png", mediatest.PNG16(700, 700)},
	} {
		up := n.upload(t, 1, g.ID, f.name, "image/png", f.data)
		if state := n.thumbOutcome(t, up.UploadID); state != "failed" {
			t.Errorf("%s (%d × %d px): thumbnail %s; its decoding and scaling take more than the 8 MB budget", f.name,
				up.Attachment.Width, up.Attachment.Height, state)
		}
		if r := n.call(t, 1, "GET", "/v1/attachments/"+up.UploadID+"/thumbnail", nil, nil); r.status != http.StatusNotFound {
			t.Errorf("%s: thumbnail download %d", f.name, r.status)
		}
	}
}

// thumbOutcome waits for the thumbnail of upload id to be made (ready) or
// given up (failed).
func (n attachNode) thumbOutcome(t *testing.T, id string) string {
	t.Helper()
	var state string
	testkit.WaitFor(t, 10*time.Second, "the thumbnail's outcome", func() bool {
		if err := n.Pool.QueryRow(context.Background(), `SELECT thumb_state FROM attachment WHERE id = $1`, id).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return state != "pending"
	})
	return state
}
