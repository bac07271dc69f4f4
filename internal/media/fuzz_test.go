package media_test

import (
	"bytes"
	"io"
	"math"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// FuzzStripKeepsTheLengthAndReadsAlike: whatever bytes an uploader sends
// as whatever type, Strip ends, never panics, returns exactly as many
// bytes as it was given, and the same ones read whole or a byte at a
// time (the walk's state does not depend on how reads are cut).
func FuzzStripKeepsTheLengthAndReadsAlike(f *testing.F) {
	types := []string{"image/jpeg", "image/png", "image/webp", "video/mp4", "video/quicktime", "audio/mp4", "application/pdf", "image/heic", "image/avif", "video/webm", "image/gif"}
	f.Add(uint8(0), mediatest.JPEGWithLocation(4, 4, 6))
	f.Add(uint8(1), mediatest.PNGWithLocationAfterIDAT(4, 4, 6))
	f.Add(uint8(2), mediatest.WebPWithLocation(4, 4, 6, 64))
	f.Add(uint8(3), mediatest.MP4WithLocation(false, true, true, 64, 0))
	f.Add(uint8(4), mediatest.MP4WithLocation(true, false, false, 64, 32))
	f.Add(uint8(0), mediatest.JPEGWithPlaceNames(4, 4))
	f.Add(uint8(0), append(mediatest.JPEGWithLocation(4, 4, 6), mediatest.MP4WithLocation(false, true, false, 64, 0)...))
	f.Add(uint8(6), mediatest.PDF())
	f.Add(uint8(7), mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64}, 6))
	f.Add(uint8(7), mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64, SplitExif: true, SplitBackwards: true}, 6))
	f.Add(uint8(8), mediatest.HEIFWithLocation(mediatest.HEIFLayout{Brand: "avif", Pad: 64, ExifInIdat: true}, 6))
	f.Add(uint8(7), mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64, ExifFirst: true, MdatFirst: true}, 6))
	f.Add(uint8(9), mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 64}))
	f.Add(uint8(9), mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 64, TagsFirst: true, CRC: true, UnknownSegment: true}))
	f.Add(uint8(9), mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 64, UnknownSegment: true, UnknownCluster: true, UnknownTags: true, Tiny: 64}))
	f.Add(uint8(10), mediatest.GIFWithLocation(4, 4, 64))
	// What the strip walks beyond the plain layouts: GPS directories
	// every pointer reaches, extended XMP out of order and a motion
	// photo's MP4; a video's XMP (MP4 uuid, MOV udta/XMP_); PNG's exIf,
	// zxIf, tXMP and chunks after IEND; Photoshop's resources; a drone's
	// XMP.
	f.Add(uint8(0), mediatest.JPEGWithHiddenLocation(4, 4))
	f.Add(uint8(3), mediatest.MP4WithXMP(false))
	f.Add(uint8(4), mediatest.MP4WithXMP(true))
	for _, file := range locatedFiles() {
		f.Add(uint8(slices.Index(types, file.ctype)), file.bytes)
	}
	f.Fuzz(func(t *testing.T, which uint8, file []byte) {
		ctype := types[int(which)%len(types)]
		whole, err := io.ReadAll(media.Strip(bytes.NewReader(file), ctype))
		if err != nil {
			t.Fatal(err)
		}
		if len(whole) != len(file) {
			t.Fatalf("%s: %d bytes became %d", ctype, len(file), len(whole))
		}
		slow, err := io.ReadAll(media.Strip(iotest.OneByteReader(bytes.NewReader(file)), ctype))
		if err != nil || !bytes.Equal(slow, whole) {
			t.Fatalf("%s: read a byte at a time: %v, equal %v", ctype, err, bytes.Equal(slow, whole))
		}
	})
}

// FuzzHEIFSizeNeverPanicsAndIsASize: whatever bytes an uploader sends as
// a HEIF image, HEIFSize ends, never panics, and a size it reports is one
// an attachment can carry (1 to 2^31-1 pixels a side).
func FuzzHEIFSizeNeverPanicsAndIsASize(f *testing.F) {
	f.Add(mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64, Width: 4032, Height: 3024, Rotation: 1}, 6))
	f.Add(mediatest.HEIFWithLocation(mediatest.HEIFLayout{Brand: "avif", Pad: 64, ExifInIdat: true, Width: 1280, Height: 736, Crop: [2]int{1280, 720}, WideIndices: true}, 1))
	f.Add(mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64, MdatFirst: true, Width: 640, Height: 480}, 1))
	f.Fuzz(func(t *testing.T, file []byte) {
		s, ok := media.HEIFSize(bytes.NewReader(file), int64(len(file)))
		if ok && (s.Width <= 0 || s.Height <= 0 || s.Width > math.MaxInt32 || s.Height > math.MaxInt32) {
			t.Fatalf("HEIFSize = %+v", s)
		}
	})
}
