package media_test

import (
	"bytes"
	"errors"
	"image/jpeg"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// A progressive JPEG's scan can be a few bytes that have the decoder walk
// every block of the picture again: 100 of them over 4096 × 4096 pixels,
// 4 KB, take Go's decoder seconds, thousands an hour.
func TestAJPEGOfMoreScansThanEncodersWriteGetsNoThumbnail(t *testing.T) {
	few := mediatest.ScanBomb(256, 256, 10)
	if _, err := jpeg.Decode(bytes.NewReader(few)); err != nil {
		t.Fatalf("the generated JPEG does not decode: %v", err)
	}
	if _, _, err := media.Thumbnail(bytes.NewReader(few), "image/jpeg", chat.DefaultMaxImagePixels, 0); err != nil {
		t.Fatalf("a JPEG of 10 scans: %v", err)
	}
	bomb := mediatest.ScanBomb(1024, 1024, 2000)
	t.Logf("%d bytes", len(bomb))
	if _, _, err := media.Thumbnail(bytes.NewReader(bomb), "image/jpeg", chat.DefaultMaxImagePixels, 0); !errors.Is(err, media.ErrTooCostly) {
		t.Fatalf("Thumbnail of a JPEG of 2000 scans: %v, want ErrTooCostly", err)
	}
	// Read by something that is not a ReadSeeker, as well.
	if _, _, err := media.Thumbnail(struct{ *bytes.Reader }{bytes.NewReader(bomb)}, "image/jpeg", chat.DefaultMaxImagePixels, 0); !errors.Is(err, media.ErrTooCostly) {
		t.Fatalf("Thumbnail of a JPEG of 2000 scans (a plain reader): %v, want ErrTooCostly", err)
	}
}
