package media_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestSniffNamesHEICHEIFAndAVIFByTheirBrands: an iPhone's HEIC, an AVIF
// and other HEIF files are images of their own type, by their ftyp's
// brands (a structural major brand, mif1, named by the compatible ones),
// accepted as the image/* they are under the default types; declared as
// a video they are refused, not stored as an MP4.
func TestSniffNamesHEICHEIFAndAVIFByTheirBrands(t *testing.T) {
	for _, tc := range []struct {
		brand, declared, want string
	}{
		{"heic", "image/heic", "image/heic"},
		{"heix", "image/heic", "image/heic"},
		{"heic", "image/heif", "image/heif"}, // a HEIC is a HEIF
		{"heic", "image/jpeg", "image/heic"}, // misnamed: what it is
		{"avif", "image/avif", "image/avif"},
		{"mif1", "image/heif", "image/heif"},
		{"heic", "video/mp4", ""},
		{"heic", "application/octet-stream", ""},
	} {
		file := mediatest.HEIFWithLocation(mediatest.HEIFLayout{Brand: tc.brand, Pad: 64}, 1)
		got, err := media.Sniff(file, tc.declared, chat.DefaultUploadTypes)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s declared %s: accepted as %s", tc.brand, tc.declared, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s declared %s: Sniff = %q, %v; want %q", tc.brand, tc.declared, got, err, tc.want)
		}
	}
	// A head cut within the ftyp box.
	for n := 12; n < 16; n++ {
		if got, err := media.Sniff([]byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00")[:n], "image/heic", []string{"image/heic"}); got != "image/heic" {
			t.Errorf("the first %d bytes of a HEIC: Sniff = %q, %v", n, got, err)
		}
	}
	// The major brand mif1 with the compatible brand avif (or heic).
	for brands, want := range map[string]string{"mif1avifmiaf": "image/avif", "mif1heicmiaf": "image/heic", "msf1hevcmsf1": "image/heic-sequence"} {
		head := append([]byte("\x00\x00\x00\x1cftyp"+brands[:4]+"\x00\x00\x00\x00"), brands[4:]+brands[:4]...)
		if got, err := media.Sniff(head, want, []string{want}); got != want {
			t.Errorf("ftyp %s: Sniff = %q, %v; want %s", brands, got, err, want)
		}
	}
}

// TestStripEmptiesAHEIFPhotosGPSAndKeepsEveryOtherByte: a HEIC (or AVIF)
// photo's location goes as a JPEG's does: its Exif item, found by the
// meta's iinf and iloc wherever it is (in mdat after or before the image
// data, in the meta's idat, in two extents in either order), loses its GPS directory,
// zeroed; its XMP item mentioning GPS is blanked. Every other byte stays,
// however the file is read and wherever it is cut. An Exif item in two
// extents too far apart to hold together is zeroed whole; items whose
// bytes come before the meta that locates them (mdat first) stay as they
// are.
func TestStripEmptiesAHEIFPhotosGPSAndKeepsEveryOtherByte(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ctype  string
		layout mediatest.HEIFLayout
		as     mediatest.HEIFMetadata
	}{
		{"HEIC, Exif after 300 KiB of image data", "image/heic", mediatest.HEIFLayout{Pad: 300 << 10}, mediatest.HEIFStripped},
		{"HEIC, Exif first in mdat", "image/heic", mediatest.HEIFLayout{Pad: 4 << 10, ExifFirst: true}, mediatest.HEIFStripped},
		{"AVIF, Exif in idat", "image/avif", mediatest.HEIFLayout{Brand: "avif", Pad: 4 << 10, ExifInIdat: true}, mediatest.HEIFStripped},
		{"HEIF, Exif in two extents", "image/heif", mediatest.HEIFLayout{Brand: "mif1", Pad: 4 << 10, SplitExif: true}, mediatest.HEIFStripped},
		{"HEIC, Exif in two extents, the second first in the file", "image/heic", mediatest.HEIFLayout{Pad: 4 << 10, SplitExif: true, SplitBackwards: true}, mediatest.HEIFStripped},
		{"HEIC, Exif in two extents 300 KiB apart", "image/heic", mediatest.HEIFLayout{Pad: 300 << 10, SplitExif: true}, mediatest.HEIFExifZeroed},
		{"HEIC, mdat before meta", "image/heic", mediatest.HEIFLayout{Pad: 4 << 10, MdatFirst: true}, mediatest.HEIFLocated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := mediatest.HEIFWithLocation(tc.layout, 6)
			if !bytes.Contains(file, mediatest.Latitude) || !bytes.Contains(file, mediatest.XMPLatitude) {
				t.Fatal("the test photo has no location")
			}
			as := tc.layout
			as.As = tc.as
			want := mediatest.HEIFWithLocation(as, 6)
			strippedTo(t, file, tc.ctype, want)
		})
	}
}

// TestAHEIFImagesSizeIsItsPrimaryItemsExtentAsShown: a HEIC or AVIF,
// which chatd does not decode, has the size its container gives the
// primary item (not a thumbnail item's, listed first), cropped by its
// clean aperture and turned by its irot: a quarter or three swap width
// and height, a half does not; the Exif orientation is not applied. The
// meta after the image data, and 16-bit property indices, read alike; a
// file without a size, or cut before it, has none.
func TestAHEIFImagesSizeIsItsPrimaryItemsExtentAsShown(t *testing.T) {
	for _, tc := range []struct {
		name          string
		layout        mediatest.HEIFLayout
		orientation   uint16
		width, height int
	}{
		{"HEIC", mediatest.HEIFLayout{Pad: 64, Width: 4032, Height: 3024}, 1, 4032, 3024},
		{"HEIC turned a quarter by irot", mediatest.HEIFLayout{Pad: 64, Width: 4032, Height: 3024, Rotation: 3}, 6, 3024, 4032},
		{"HEIC turned a quarter anticlockwise", mediatest.HEIFLayout{Pad: 64, Width: 4032, Height: 3024, Rotation: 1}, 1, 3024, 4032},
		{"HEIC upside down", mediatest.HEIFLayout{Pad: 64, Width: 4032, Height: 3024, Rotation: 2}, 1, 4032, 3024},
		{"HEIC whose Exif says turned, irot not", mediatest.HEIFLayout{Pad: 64, Width: 4032, Height: 3024}, 6, 4032, 3024},
		{"AVIF cropped and turned", mediatest.HEIFLayout{Brand: "avif", Pad: 64, ExifInIdat: true, Width: 1280, Height: 736, Crop: [2]int{1280, 720}, Rotation: 1}, 1, 720, 1280},
		{"HEIF, 16-bit indices", mediatest.HEIFLayout{Brand: "mif1", Pad: 64, Width: 800, Height: 600, WideIndices: true, Rotation: 1}, 1, 600, 800},
		{"HEIC, mdat before meta", mediatest.HEIFLayout{Pad: 300 << 10, MdatFirst: true, Width: 640, Height: 480}, 1, 640, 480},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := mediatest.HEIFWithLocation(tc.layout, tc.orientation)
			size, ok := media.HEIFSize(bytes.NewReader(file), int64(len(file)))
			if !ok || size.Width != tc.width || size.Height != tc.height {
				t.Fatalf("HEIFSize = %+v, %v; want %d × %d", size, ok, tc.width, tc.height)
			}
			stripped, err := io.ReadAll(media.Strip(bytes.NewReader(file), "image/heic"))
			if err != nil {
				t.Fatal(err)
			}
			if again, ok := media.HEIFSize(bytes.NewReader(stripped), int64(len(stripped))); !ok || again != size {
				t.Fatalf("stripped: HEIFSize = %+v, %v; want %+v", again, ok, size)
			}
		})
	}
	file := mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64}, 1)
	if size, ok := media.HEIFSize(bytes.NewReader(file), int64(len(file))); ok {
		t.Errorf("a HEIC without ispe: HEIFSize = %+v, true", size)
	}
	file = mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64, Width: 640, Height: 480}, 1)
	for _, n := range []int{0, 7, 30, 60, 200, 393} { // the meta ends at 394
		if size, ok := media.HEIFSize(bytes.NewReader(file[:n]), int64(n)); ok {
			t.Errorf("cut at %d: HEIFSize = %+v, true", n, size)
		}
	}
}

// TestAHEIFsItemLocationsCostTheirBytesToRead: an iloc whose extents take
// no bytes (no length field: every extent of length 0, left out) costs no
// more than its bytes to walk, however many extents each item claims.
func TestAHEIFsItemLocationsCostTheirBytesToRead(t *testing.T) {
	infe := box("infe", []byte("\x02\x00\x00\x00\x00\x01\x00\x00Exif\x00"))
	iinf := box("iinf", append([]byte("\x00\x00\x00\x00\x00\x01"), infe...))
	const items = 3000
	iloc := []byte("\x00\x00\x00\x00\x00\x00") // version 0, sizes all 0
	iloc = binary.BigEndian.AppendUint16(iloc, items)
	for range items {
		iloc = append(iloc, 0, 1, 0, 0, 0x10, 0) // item 1, 4096 extents
	}
	iloc = append(iloc, make([]byte, 4096)...)
	meta := box("meta", bytes.Join([][]byte{{0, 0, 0, 0}, iinf, box("iloc", iloc)}, nil))
	file := bytes.Join([][]byte{box("ftyp", []byte("heic\x00\x00\x00\x00mif1heic")), meta, box("mdat", make([]byte, 64))}, nil)
	if took := stripAllocs(t, file, "image/heic"); took > 8*uint64(len(file)) {
		t.Errorf("stripping a HEIF of %d KiB allocated %d KiB", len(file)>>10, took>>10)
	}
}

// TestAHEIFItemOfOverlappingExtentsCostsItsBytesToStrip: an Exif item
// whose extents cover the same bytes thousands of times (in the meta's
// idat) is not put together thousands of times over to be read: the
// strip allocates about what the file holds.
func TestAHEIFItemOfOverlappingExtentsCostsItsBytesToStrip(t *testing.T) {
	infe := box("infe", []byte("\x02\x00\x00\x00\x00\x01\x00\x00Exif\x00"))
	iinf := box("iinf", append([]byte("\x00\x00\x00\x00\x00\x01"), infe...))
	const extents, idatLen = 2000, 32 << 10
	iloc := []byte("\x01\x00\x00\x00\x44\x00\x00\x01\x00\x01\x00\x01\x00\x00") // version 1, item 1 in the idat
	iloc = binary.BigEndian.AppendUint16(iloc, extents)
	for range extents {
		iloc = binary.BigEndian.AppendUint32(iloc, 0)
		iloc = binary.BigEndian.AppendUint32(iloc, idatLen)
	}
	idat := bytes.Repeat(mediatest.Latitude, idatLen/len(mediatest.Latitude)+1)[:idatLen]
	meta := box("meta", bytes.Join([][]byte{{0, 0, 0, 0}, iinf, box("iloc", iloc), box("idat", idat)}, nil))
	file := bytes.Join([][]byte{box("ftyp", []byte("heic\x00\x00\x00\x00mif1heic")), meta, box("mdat", make([]byte, 64))}, nil)
	// The meta held whole, its extents listed, the read buffer (the
	// race detector's allocations besides).
	if took := stripAllocs(t, file, "image/heic"); took > 16*uint64(len(file)) {
		t.Errorf("stripping a HEIF of %d KiB allocated %d KiB", len(file)>>10, took>>10)
	}
}
