package media_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// tiffEntry is an IFD entry; ref >= 0 makes its value the offset of the
// directory of that index (a pointer tag: GPSInfo, ExifIFD, SubIFDs).
type tiffEntry struct {
	tag, typ uint16
	count    uint32
	value    uint32
	ref      int
}

// tiffDir is a directory of a hand-made TIFF block; next >= 0 names the
// directory its next-IFD pointer points to (IFD0's: IFD1).
type tiffDir struct {
	entries []tiffEntry
	next    int
	lat     uint32 // a GPS directory: the latitude's degrees, its values after all directories
}

// tiffBlock lays little-endian directories out from offset 8, the first
// being IFD0, each GPS one (lat > 0) holding GPSLatitudeRef "N" and a
// GPSLatitude of lat° 31' 12" stored after the directories.
func tiffBlock(dirs []tiffDir) []byte {
	le := binary.LittleEndian
	offs := make([]int, len(dirs))
	off := 8
	for i, d := range dirs {
		n := len(d.entries)
		if d.lat > 0 {
			n = 2
		}
		offs[i] = off
		off += 2 + 12*n + 4
	}
	t := append([]byte("II*\x00"), le.AppendUint32(nil, 8)...)
	var values []byte
	for i, d := range dirs {
		entries := d.entries
		if d.lat > 0 {
			entries = []tiffEntry{
				{tag: 1, typ: 2, count: 2, value: 'N', ref: -1},
				{tag: 2, typ: 5, count: 3, value: uint32(off + len(values)), ref: -1},
			}
			for _, v := range []uint32{d.lat, 1, 31, 1, 12, 1} {
				values = le.AppendUint32(values, v)
			}
		}
		t = le.AppendUint16(t, uint16(len(entries)))
		for _, e := range entries {
			v := e.value
			if e.ref >= 0 {
				v = uint32(offs[e.ref])
			}
			t = le.AppendUint16(t, e.tag)
			t = le.AppendUint16(t, e.typ)
			t = le.AppendUint32(t, e.count)
			t = le.AppendUint32(t, v)
		}
		next := uint32(0)
		if d.next >= 0 {
			next = uint32(offs[d.next])
		}
		t = le.AppendUint32(t, next)
		if len(t) != offs[i]+2+12*len(entries)+4 {
			panic(fmt.Sprintf("directory %d laid out at %d", i, offs[i]))
		}
	}
	return append(t, values...)
}

// latitude is the GPSLatitude values tiffBlock writes for lat.
func latitude(lat uint32) []byte {
	var b []byte
	for _, v := range []uint32{lat, 1, 31, 1, 12, 1} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// jpegWithEXIF is a small JPEG whose APP1 holds the TIFF block t.
func jpegWithEXIF(t []byte) []byte {
	plain := mediatest.JPEG(16, 8)
	seg := append([]byte("Exif\x00\x00"), t...)
	out := append([]byte{}, plain[:2]...)
	out = append(out, 0xFF, 0xE1, byte((len(seg)+2)>>8), byte(len(seg)+2))
	out = append(out, seg...)
	return append(out, plain[2:]...)
}

// TestStripEmptiesEveryGPSDirectoryAnEXIFPointsTo: a GPS directory is
// found by readers (ExifTool among them) through a GPSInfo pointer in
// any directory, not only the last one of IFD0: a second pointer, one in
// IFD1 (the thumbnail's), in the Exif IFD or in a SubIFD. None of their
// positions survives, and the orientation is still read.
func TestStripEmptiesEveryGPSDirectoryAnEXIFPointsTo(t *testing.T) {
	orientation := tiffEntry{tag: 0x0112, typ: 3, count: 1, value: 6, ref: -1}
	ptr := func(tag uint16, dir int) tiffEntry { return tiffEntry{tag: tag, typ: 4, count: 1, ref: dir} }
	for _, tc := range []struct {
		name string
		dirs []tiffDir
	}{
		{"two GPSInfo pointers in IFD0", []tiffDir{
			{entries: []tiffEntry{orientation, ptr(0x8825, 1), ptr(0x8825, 2)}, next: -1},
			{lat: 41, next: -1}, {lat: 42, next: -1}}},
		{"a GPSInfo pointer in IFD1", []tiffDir{
			{entries: []tiffEntry{orientation}, next: 1},
			{entries: []tiffEntry{ptr(0x8825, 2)}, next: -1}, {lat: 43, next: -1}}},
		{"a GPSInfo pointer in the Exif IFD", []tiffDir{
			{entries: []tiffEntry{orientation, ptr(0x8769, 1)}, next: -1},
			{entries: []tiffEntry{ptr(0x8825, 2)}, next: -1}, {lat: 44, next: -1}}},
		{"a GPSInfo pointer in a SubIFD", []tiffDir{
			{entries: []tiffEntry{orientation, ptr(0x014A, 1)}, next: -1},
			{entries: []tiffEntry{ptr(0x8825, 2)}, next: -1}, {lat: 45, next: -1}}},
		{"IFD0 and IFD1 pointing at each other", []tiffDir{
			{entries: []tiffEntry{orientation}, next: 1},
			{entries: []tiffEntry{ptr(0x8825, 2)}, next: 0}, {lat: 46, next: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := jpegWithEXIF(tiffBlock(tc.dirs))
			var lats [][]byte
			for _, d := range tc.dirs {
				if d.lat > 0 {
					lats = append(lats, latitude(d.lat))
					if !bytes.Contains(file, lats[len(lats)-1]) {
						t.Fatal("the test photo has no latitude")
					}
				}
			}
			got := stripped(t, file, "image/jpeg")
			for i, lat := range lats {
				if bytes.Contains(got, lat) {
					t.Errorf("the latitude of GPS directory %d of %d survived", i+1, len(lats))
				}
			}
			if _, err := jpeg.Decode(bytes.NewReader(got)); err != nil {
				t.Fatalf("the stripped photo no longer decodes: %v", err)
			}
			if _, o := media.StripLocation(append([]byte{}, file...), "image/jpeg"); o != 6 {
				t.Errorf("orientation %d, want 6", o)
			}
		})
	}
}

// extendedXMP is a JPEG APP1 segment holding the part of an extended XMP
// packet of full bytes that starts at off.
func extendedXMP(guid string, full int, off int, part []byte) []byte {
	body := append([]byte("http://ns.adobe.com/xmp/extension/\x00"), guid...)
	body = binary.BigEndian.AppendUint32(body, uint32(full))
	body = binary.BigEndian.AppendUint32(body, uint32(off))
	body = append(body, part...)
	return append([]byte{0xFF, 0xE1, byte((len(body) + 2) >> 8), byte(len(body) + 2)}, body...)
}

// TestStripBlanksAnExtendedXMPPacketsPartsInWhateverOrderTheyCome: readers
// put the parts of an extended XMP packet together by their offsets, not
// by the order of their segments, which the standard leaves free: the
// position a part holds is gone even when it comes before the part that
// names it, or when the name straddles two parts that come in reverse.
func TestStripBlanksAnExtendedXMPPacketsPartsInWhateverOrderTheyCome(t *testing.T) {
	const guid = "0123456789ABCDEF0123456789ABCDEF"
	packet := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
		`<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="52,31.2N"/></rdf:RDF></x:xmpmeta>`)
	value := []byte(`"52,31.2N"`)
	for _, tc := range []struct {
		name string
		cut  int // the packet is sent in two parts, the one after cut first
	}{
		{"the value's part before the name's", bytes.Index(packet, value)},
		{"the name straddling two parts sent in reverse", bytes.Index(packet, []byte("GPSLatitude")) + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := mediatest.JPEG(16, 8)
			std := append([]byte("http://ns.adobe.com/xap/1.0/\x00"),
				`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description xmpNote:HasExtendedXMP="`+guid+`"/></rdf:RDF></x:xmpmeta>`...)
			file := append([]byte{}, plain[:2]...)
			file = append(file, 0xFF, 0xE1, byte((len(std)+2)>>8), byte(len(std)+2))
			file = append(file, std...)
			file = append(file, extendedXMP(guid, len(packet), tc.cut, packet[tc.cut:])...)
			file = append(file, extendedXMP(guid, len(packet), 0, packet[:tc.cut])...)
			file = append(file, plain[2:]...)
			got := stripped(t, file, "image/jpeg")
			if bytes.Contains(got, value) {
				t.Fatalf("the latitude %s survived", value)
			}
			if _, err := jpeg.Decode(bytes.NewReader(got)); err != nil {
				t.Fatalf("the stripped photo no longer decodes: %v", err)
			}
		})
	}
	// A packet without a location, its parts in order (a phone's depth
	// map), goes through as it is.
	plain := mediatest.JPEG(16, 8)
	depth := bytes.Repeat([]byte("GDepth:Data "), 200)
	file := append([]byte{}, plain[:2]...)
	file = append(file, extendedXMP(guid, len(depth), 0, depth[:1001])...)
	file = append(file, extendedXMP(guid, len(depth), 1001, depth[1001:])...)
	file = append(file, plain[2:]...)
	if got, err := io.ReadAll(media.Strip(bytes.NewReader(file), "image/jpeg")); err != nil || !bytes.Equal(got, file) {
		t.Fatalf("an extended XMP packet without a location changed: %v, equal %v", err, bytes.Equal(got, file))
	}
}

// xmpUUID is the user type of the uuid box holding an MP4's XMP packet.
var xmpUUID = []byte("\xBE\x7A\xCF\xCB\x97\xA9\x42\xE8\x9C\x71\x99\x94\x91\xE3\xAF\xAC")

// TestStripFreesAVideosXMPPacketThatSaysWhereItWasRecorded: the XMP
// packet an editor or ExifTool writes into a video (a top-level uuid box
// in an MP4, udta/XMP_ in a MOV, a track's too), with a GPS position in
// it, is gone, a free box of zeros of the same size, whatever its size;
// one without a location, and every other byte, stays.
func TestStripFreesAVideosXMPPacketThatSaysWhereItWasRecorded(t *testing.T) {
	located := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
		`<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" ` + string(mediatest.XMPLatitude) + `/></rdf:RDF></x:xmpmeta>`)
	plain := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmp:CreatorTool="chatd test"/></rdf:RDF></x:xmpmeta>`)
	big := append(append([]byte{}, located...), bytes.Repeat([]byte(" "), 300<<10)...)
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], 1000)
	binary.BigEndian.PutUint32(mvhd[16:], 2500)
	for _, tc := range []struct {
		name  string
		ctype string
		file  []byte
	}{
		{"MP4, a uuid box after moov", "video/mp4", bytes.Join([][]byte{
			box("ftyp", []byte("isom\x00\x00\x02\x00isommp41")),
			box("moov", box("mvhd", mvhd)),
			box("uuid", append(append([]byte{}, xmpUUID...), located...)),
			box("mdat", make([]byte, 1000)),
		}, nil)},
		{"MP4, a uuid box of 300 KiB before moov", "video/mp4", bytes.Join([][]byte{
			box("ftyp", []byte("isom\x00\x00\x02\x00isommp41")),
			box("uuid", append(append([]byte{}, xmpUUID...), big...)),
			box("moov", box("mvhd", mvhd)),
			box("mdat", make([]byte, 1000)),
		}, nil)},
		{"MOV, udta/XMP_ of moov and of a track", "video/quicktime", bytes.Join([][]byte{
			box("ftyp", []byte("qt  \x00\x00\x02\x00qt  ")),
			box("moov", bytes.Join([][]byte{
				box("mvhd", mvhd),
				box("trak", bytes.Join([][]byte{box("tkhd", make([]byte, 84)), box("udta", box("XMP_", located))}, nil)),
				box("udta", bytes.Join([][]byte{box("XMP_", located), box("\xa9too", []byte("chatd test"))}, nil)),
			}, nil)),
			box("mdat", make([]byte, 1000)),
		}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A packet without a location, in a box of its own, stays.
			file := append(append([]byte{}, tc.file...), box("uuid", append(append([]byte{}, xmpUUID...), plain...))...)
			want := append([]byte{}, file...)
			freed := 0
			for _, n := range mp4Tree(t, file) {
				b := want[n.off : n.off+n.size]
				if (n.typ == "uuid" || n.typ == "XMP_") && bytes.Contains(b, mediatest.XMPLatitude) {
					copy(b[4:], "free")
					clear(b[n.hl:])
					freed++
				}
			}
			if freed == 0 {
				t.Fatal("the test video has no XMP packet with a location")
			}
			got := strippedTo(t, file, tc.ctype, want)
			if bytes.Contains(got, mediatest.XMPLatitude) {
				t.Fatal("the location survived")
			}
			if d := media.Duration(bytes.NewReader(got), int64(len(got)), tc.ctype); d != 2500 {
				t.Errorf("duration %d ms, want 2500", d)
			}
		})
	}
}

// TestAPalettedPNGCostsTheSameWhateverTextPrecedesItsPalette: Go reads a
// paletted PNG's header up to its palette, past any text chunks before
// it; what ThumbnailCost says comes from the header (IHDR, at the
// file's start), not from whatever bytes the last 256 KiB of the text
// hold.
func TestAPalettedPNGCostsTheSameWhateverTextPrecedesItsPalette(t *testing.T) {
	img := image.NewPaletted(image.Rect(0, 0, 300, 200), color.Palette{color.White, color.Black})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	plain := b.Bytes()
	if string(plain[37:41]) != "PLTE" {
		t.Fatalf("the test PNG has %q after IHDR", plain[37:41])
	}
	want, err := media.ThumbnailCost(bytes.NewReader(plain), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []int{1 << 10, 300 << 10, 3 << 20} {
		data := append([]byte("Comment\x00"), bytes.Repeat([]byte{0x10}, text)...)
		chunk := pngChunk("tEXt", data)
		file := afterIHDR(plain, chunk)
		if _, err := png.Decode(bytes.NewReader(file)); err != nil {
			t.Fatalf("the test PNG does not decode: %v", err)
		}
		if got, err := media.ThumbnailCost(bytes.NewReader(file), "image/png"); err != nil || got != want {
			t.Errorf("after %d KiB of text: cost %d (%v), want %d", text>>10, got, err, want)
		}
	}
}

// TestAPictureAfterMegabytesOfMetadataCostsItsOwnFrameNotALookalike: the
// frame header a picture is costed by is the one Go's decoder reads, the
// first, however much metadata precedes it; a lookalike of a smaller
// picture in a segment after it (within what the decoder reads ahead)
// does not make a thumbnail cost less than it takes.
func TestAPictureAfterMegabytesOfMetadataCostsItsOwnFrameNotALookalike(t *testing.T) {
	plain := mediatest.JPEG(200, 100)
	sof := bytes.Index(plain, []byte{0xFF, 0xC0})
	if sof < 0 {
		t.Fatal("the test JPEG has no baseline frame header")
	}
	end := sof + 2 + int(binary.BigEndian.Uint16(plain[sof+2:]))
	// An APP15 segment holding a grayscale frame header of the same size.
	fake := []byte{0xFF, 0xEF, 0x00, 0x0F, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00, 100, 0x00, 200, 0x01, 0x01, 0x11, 0x00}
	file := append(append(append([]byte{}, plain[:end]...), fake...), plain[end:]...)
	if _, err := jpeg.Decode(bytes.NewReader(file)); err != nil {
		t.Fatalf("the test JPEG does not decode: %v", err)
	}
	want, err := media.ThumbnailCost(bytes.NewReader(file), "image/jpeg")
	if err != nil {
		t.Fatal(err)
	}
	padded := append([]byte{}, file[:2]...)
	for range 20 {
		seg := append([]byte{0xFF, 0xE2, 0xFD, 0xEA}, "ICC_PROFILE\x00"...)
		padded = append(padded, append(seg, make([]byte, 0xFDEA-2-12)...)...)
	}
	padded = append(padded, file[2:]...)
	if got, err := media.ThumbnailCost(bytes.NewReader(padded), "image/jpeg"); err != nil || got != want {
		t.Errorf("after 1 MiB of metadata: cost %d (%v), want %d", got, err, want)
	}
	// Without JFIF the decoder reads the header on to the first scan:
	// 1 MiB of metadata between the frame header and the scan does not
	// hide the frame header either (nor make it cost the worst case).
	between := append([]byte{}, plain[:end]...)
	for range 20 {
		seg := append([]byte{0xFF, 0xE2, 0xFD, 0xEA}, "ICC_PROFILE\x00"...)
		between = append(between, append(seg, make([]byte, 0xFDEA-2-12)...)...)
	}
	between = append(between, plain[end:]...)
	if got, err := media.ThumbnailCost(bytes.NewReader(between), "image/jpeg"); err != nil || got != want {
		t.Errorf("1 MiB of metadata after the frame header: cost %d (%v), want %d", got, err, want)
	}
}

// TestAnAdobeSegmentAfterTheFrameHeaderCostsAsOneBefore: Go's decoder
// reads a picture without JFIF to its first scan, and an Adobe segment
// saying RGB anywhere before the scan has it convert the picture to RGBA
// (4 bytes a pixel more): the cost counts it wherever the segment is.
func TestAnAdobeSegmentAfterTheFrameHeaderCostsAsOneBefore(t *testing.T) {
	plain := mediatest.JPEG(1000, 700)
	sof := bytes.Index(plain, []byte{0xFF, 0xC0})
	end := sof + 2 + int(binary.BigEndian.Uint16(plain[sof+2:]))
	adobe := append([]byte{0xFF, 0xEE, 0x00, 0x0E}, "Adobe\x00\x64\x00\x00\x00\x00\x00"...) // transform 0: RGB
	before := append(append(append([]byte{}, plain[:2]...), adobe...), plain[2:]...)
	after := append(append(append([]byte{}, plain[:end]...), adobe...), plain[end:]...)
	for _, f := range [][]byte{before, after} {
		if cfg, err := jpeg.DecodeConfig(bytes.NewReader(f)); err != nil || cfg.ColorModel != color.RGBAModel {
			t.Fatalf("the test JPEG is not read as RGB: %v", err)
		}
	}
	want, err := media.ThumbnailCost(bytes.NewReader(before), "image/jpeg")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := media.ThumbnailCost(bytes.NewReader(after), "image/jpeg"); err != nil || got != want {
		t.Errorf("the Adobe segment after the frame header: cost %d (%v), before it %d", got, err, want)
	}
}

// TestStripFreesTheLocationOfAVideoAppendedToAPhoto: a motion photo (a
// phone's photo with the seconds of video around it) is a JPEG with an
// MP4 appended after its end; the video's recording location goes as it
// goes from a video uploaded alone, and the photo's as from a photo.
func TestStripFreesTheLocationOfAVideoAppendedToAPhoto(t *testing.T) {
	photo := mediatest.JPEGWithLocation(64, 48, 6)
	video := mediatest.MP4WithLocation(false, true, false, 20<<10, 0)
	strip := func(b []byte, ctype string) []byte {
		out, err := io.ReadAll(media.Strip(bytes.NewReader(b), ctype))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	file := append(append([]byte{}, photo...), video...)
	want := append(strip(photo, "image/jpeg"), strip(video, "video/mp4")...)
	got := strippedTo(t, file, "image/jpeg", want)
	if bytes.Contains(got, mediatest.VideoLocation) || bytes.Contains(got, mediatest.LociName) {
		t.Fatal("the video's location survived")
	}
	if _, err := jpeg.Decode(bytes.NewReader(got)); err != nil {
		t.Fatalf("the stripped photo no longer decodes: %v", err)
	}
}

// TestStripEndsOnAPhotoFollowedByAVideoHeaderOfNoSize: bytes after a
// photo that name a video (ftyp) in a box shorter than its header are
// passed, not walked again forever, and a motion photo's video after
// them still loses its location.
func TestStripEndsOnAPhotoFollowedByAVideoHeaderOfNoSize(t *testing.T) {
	for _, header := range []string{"\x00\x00\x00\x04ftyp", "\x00\x00\x00\x07ftypiso", "\x00\x00\x00\x01ftyp\x00\x00\x00\x00\x00\x00\x00\x0F"} {
		video := mediatest.MP4WithLocation(false, true, false, 1<<10, 0)
		file := bytes.Join([][]byte{mediatest.JPEG(16, 8), []byte(header), video}, nil)
		got := stripWithin(t, file, "image/jpeg", 5*time.Second, fmt.Sprintf("header %q: Strip has not ended after 5 s", header))
		if len(got) != len(file) {
			t.Fatalf("header %q: %d bytes became %d", header, len(file), len(got))
		}
		if bytes.Contains(got, mediatest.VideoLocation) {
			t.Errorf("header %q: the video's location survived", header)
		}
	}
}

// TestAnEXIFListingManyDirectoriesCostsLittleToStrip: the directories
// walked for GPSInfo pointers are bounded however many an EXIF block
// lists: a PNG's eXIf of 20,000 SubIFDs entries, each listing 64
// directories, is stripped holding no more than a few of them.
func TestAnEXIFListingManyDirectoriesCostsLittleToStrip(t *testing.T) {
	le := binary.LittleEndian
	const n = 20000
	array := 8 + 2 + 12*n + 4
	tiff := append([]byte("II*\x00"), le.AppendUint32(nil, 8)...)
	tiff = le.AppendUint16(tiff, n)
	for range n {
		tiff = le.AppendUint16(tiff, 0x014A)
		tiff = le.AppendUint16(tiff, 4)
		tiff = le.AppendUint32(tiff, 64)
		tiff = le.AppendUint32(tiff, uint32(array))
	}
	tiff = le.AppendUint32(tiff, 0)
	for i := range 64 {
		tiff = le.AppendUint32(tiff, uint32(8+12*i))
	}
	chunk := pngChunk("eXIf", tiff)
	plain := mediatest.PNG(8, 8)
	file := afterIHDR(plain, chunk)
	if took := stripAllocs(t, file, "image/png"); took > 8*uint64(len(file)) {
		t.Errorf("stripping a file of %d KiB allocated %d KiB", len(file)>>10, took>>10)
	}
}

// TestAnEXIFOfOverlappingGPSDirectoriesCostsLittleToStrip: GPS pointers
// to thousands of directories laid over one another (each listing the
// next one's entries as its own) cost no walk of the block each: a MiB of
// such EXIF segments is stripped in well under a second (it took about
// 3 s), and no directory's entries survive.
func TestAnEXIFOfOverlappingGPSDirectoriesCostsLittleToStrip(t *testing.T) {
	le := binary.LittleEndian
	const size, pointers = 65000, 2600
	dirs := 8 + 2 + 12*pointers + 4 // where the GPS directories start, 2 bytes apart
	tiff := append([]byte("II*\x00"), le.AppendUint32(nil, 8)...)
	tiff = le.AppendUint16(tiff, pointers)
	for i := range pointers { // the last directory first: none clears the next one's count
		tiff = le.AppendUint16(tiff, 0x8825)
		tiff = le.AppendUint16(tiff, 4)
		tiff = le.AppendUint32(tiff, 1)
		tiff = le.AppendUint32(tiff, uint32(dirs+2*(pointers-1-i)))
	}
	tiff = le.AppendUint32(tiff, 0)
	count := (size - dirs - 2*pointers) / 12
	for len(tiff) < size {
		tiff = le.AppendUint16(tiff, uint16(count))
	}
	segment := jpegWithEXIF(tiff)
	plain := mediatest.JPEG(16, 8)
	segment = segment[2 : len(segment)-len(plain)+2]
	file := append([]byte{}, plain[:2]...)
	for range 16 {
		file = append(file, segment...)
	}
	file = append(file, plain[2:]...)
	got := stripWithin(t, file, "image/jpeg", time.Second, fmt.Sprintf("stripping %d KiB of EXIF took over a second", len(file)>>10))
	if len(got) != len(file) {
		t.Fatalf("%d bytes became %d", len(file), len(got))
	}
	if bytes.Contains(got, le.AppendUint16(le.AppendUint16(nil, uint16(count)), uint16(count))) {
		t.Error("a GPS directory's entries survived")
	}
}

// TestAnEXIFOfDirectoriesOverlappingItsOwnCostsLittleToStrip: SubIFDs
// laid over IFD0's entries (each starting in the value of one, every
// entry of theirs then a GPSInfo pointer) list a GPSInfo pointer for
// every 12 bytes of every directory: the pointers gathered stay within
// what the block holds.
func TestAnEXIFOfDirectoriesOverlappingItsOwnCostsLittleToStrip(t *testing.T) {
	le := binary.LittleEndian
	const n, subs = 21000, 63
	value := func(k int) int { return 8 + 2 + 12*k + 8 } // where IFD0's entry k keeps its value
	array := 8 + 2 + 12*n + 4
	tiff := append([]byte("II*\x00"), le.AppendUint32(nil, 8)...)
	tiff = le.AppendUint16(tiff, n)
	tiff = le.AppendUint16(tiff, 0x014A) // SubIFDs: at the values of entries 1 to subs
	tiff = le.AppendUint16(tiff, 4)
	tiff = le.AppendUint32(tiff, subs)
	tiff = le.AppendUint32(tiff, uint32(array))
	count := (array - value(subs) - 2) / 12
	for range n - 1 { // GPSInfo, its value read by a SubIFD as its count, then as its entries' tag
		tiff = le.AppendUint16(tiff, 0x8825)
		tiff = le.AppendUint16(tiff, 4)
		tiff = le.AppendUint32(tiff, 1)
		tiff = le.AppendUint32(tiff, 0x8825<<16|uint32(count))
	}
	tiff = le.AppendUint32(tiff, 0)
	for k := 1; k <= subs; k++ {
		tiff = le.AppendUint32(tiff, uint32(value(k)))
	}
	chunk := pngChunk("eXIf", tiff)
	plain := mediatest.PNG(8, 8)
	file := afterIHDR(plain, chunk)
	// The chunk held whole, the pointers it may hold, the read buffer
	// (the race detector's allocations besides).
	if took := stripAllocs(t, file, "image/png"); took > 16*uint64(len(file)) {
		t.Errorf("stripping a file of %d KiB allocated %d KiB", len(file)>>10, took>>10)
	}
}

// stripAllocs strips file as ctype, checks its length is kept, and
// returns the bytes allocated doing it.
// stripWithin reads file of ctype through Strip and returns what Strip
// passed on; if that takes longer than d (a Strip that walks on and on),
// it fails t saying late.
func stripWithin(t *testing.T, file []byte, ctype string, d time.Duration, late string) []byte {
	t.Helper()
	done := make(chan []byte, 1)
	go func() {
		got, _ := io.ReadAll(media.Strip(bytes.NewReader(file), ctype))
		done <- got
	}()
	select {
	case got := <-done:
		return got
	case <-time.After(d):
		t.Fatal(late)
		return nil
	}
}

func stripAllocs(t *testing.T, file []byte, ctype string) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := io.ReadAll(media.Strip(bytes.NewReader(file), ctype))
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != len(file) {
		t.Fatalf("%d bytes became %d: %v", len(file), len(got), err)
	}
	return after.TotalAlloc - before.TotalAlloc
}

// TestStripRemovesALocationFromEveryPNGChunkExifToolReads: ExifTool reads
// EXIF from a chunk of any case of "eXIf" (exIf, as some writers spelled
// it) and from the once-proposed compressed zxIf, XMP from the obsolete
// tXMP, and chunks after IEND too: a location in any of them is gone, and
// the picture still decodes.
func TestStripRemovesALocationFromEveryPNGChunkExifToolReads(t *testing.T) {
	exif := tiffBlock([]tiffDir{{entries: []tiffEntry{{tag: 0x8825, typ: 4, count: 1, ref: 1}}, next: -1}, {lat: 47, next: -1}})
	xmp := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" ` +
		string(mediatest.XMPLatitude) + `/></rdf:RDF></x:xmpmeta>`)
	plain := mediatest.PNG(8, 8)
	iend := len(plain) - 12
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"exIf before IDAT", afterIHDR(plain, pngChunk("exIf", exif))},
		{"zxIf before IDAT", afterIHDR(plain, pngChunk("zxIf", exif))},
		{"tXMP before IEND", append(append(append([]byte{}, plain[:iend]...), pngChunk("tXMP", xmp)...), plain[iend:]...)},
		{"eXIf after IEND", append(append([]byte{}, plain...), pngChunk("eXIf", exif)...)},
		{"iTXt after IEND", append(append([]byte{}, plain...), pngChunk("iTXt", append([]byte("XML:com.adobe.xmp\x00\x00\x00\x00\x00"), xmp...))...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stripped(t, tc.file, "image/png")
			if bytes.Contains(got, latitude(47)) || bytes.Contains(got, mediatest.XMPLatitude) {
				t.Fatal("the location survived")
			}
			if _, err := png.Decode(bytes.NewReader(got)); err != nil {
				t.Fatalf("the stripped picture no longer decodes: %v", err)
			}
		})
	}
}

// TestStripRemovesTheLocationPhotoshopKeepsInItsImageResources: besides
// the IPTC place names, a JPEG's Photoshop image resources (APP13) may
// hold a copy of the EXIF (0x0422, 0x0423) and of the XMP packet
// (0x0424), which ExifTool reads: their GPS position goes too.
func TestStripRemovesTheLocationPhotoshopKeepsInItsImageResources(t *testing.T) {
	resource := func(id uint16, data []byte) []byte {
		r := binary.BigEndian.AppendUint16([]byte("8BIM"), id)
		r = append(r, 0, 0) // an empty name, padded
		r = binary.BigEndian.AppendUint32(r, uint32(len(data)))
		r = append(r, data...)
		if len(data)%2 == 1 {
			r = append(r, 0)
		}
		return r
	}
	xmp := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" ` +
		string(mediatest.XMPLatitude) + `/></rdf:RDF></x:xmpmeta>`)
	exif := func(lat uint32) []byte {
		return tiffBlock([]tiffDir{{entries: []tiffEntry{{tag: 0x8825, typ: 4, count: 1, ref: 1}}, next: -1}, {lat: lat, next: -1}})
	}
	irb := append([]byte("Photoshop 3.0\x00"), resource(0x0422, exif(48))...)
	irb = append(irb, resource(0x0423, exif(49))...)
	irb = append(irb, resource(0x0424, xmp)...)
	plain := mediatest.JPEG(16, 8)
	file := append([]byte{}, plain[:2]...)
	file = append(file, 0xFF, 0xED, byte((len(irb)+2)>>8), byte(len(irb)+2))
	file = append(file, irb...)
	file = append(file, plain[2:]...)
	got := stripped(t, file, "image/jpeg")
	if bytes.Contains(got, latitude(48)) || bytes.Contains(got, latitude(49)) || bytes.Contains(got, mediatest.XMPLatitude) {
		t.Fatal("the location survived")
	}
	if _, err := jpeg.Decode(bytes.NewReader(got)); err != nil {
		t.Fatalf("the stripped photo no longer decodes: %v", err)
	}
}

// TestAWebPsOrientationIsReadBeyondItsHeadInAFewReads: the EXIF chunk of
// a WebP comes after the image data; Orientation finds it past the head,
// reading chunk headers at their offsets (a range request each on an
// object store), a few for a still picture.
func TestAWebPsOrientationIsReadBeyondItsHeadInAFewReads(t *testing.T) {
	for _, pad := range []int{1 << 10, 300 << 10, 3 << 20} {
		file := mediatest.WebPWithLocation(40, 30, 6, pad)
		head := append([]byte{}, file[:min(len(file), media.HeadLen)]...)
		c := &readCounter{r: bytes.NewReader(file)}
		if o := media.Orientation(c, int64(len(file)), "image/webp", head); o != 6 {
			t.Errorf("after %d KiB of image data: orientation %d, want 6", pad>>10, o)
		}
		if c.reads > 4 {
			t.Errorf("after %d KiB of image data: %d reads", pad>>10, c.reads)
		}
	}
}

// TestStripBlanksADroneSPositionInItsXMP: a DJI drone's photo keeps its
// position in its XMP too, as drone-dji:GpsLatitude and GpsLongitude (or
// GpsLongtitude, as some models spell it), not GPS: that packet is
// blanked as one naming GPS is.
func TestStripBlanksADroneSPositionInItsXMP(t *testing.T) {
	for _, attrs := range []string{
		`drone-dji:GpsLatitude="+44.9446257" drone-dji:GpsLongitude="-93.4259758"`,
		`drone-dji:GpsLongtitude="-93.4259758" drone-dji:AbsoluteAltitude="+287.00"`,
	} {
		packet := append([]byte("http://ns.adobe.com/xap/1.0/\x00"), `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description `+
			`xmlns:drone-dji="http://www.dji.com/drone-dji/1.0/" `+attrs+`/></rdf:RDF></x:xmpmeta>`...)
		plain := mediatest.JPEG(16, 8)
		file := append([]byte{}, plain[:2]...)
		file = append(file, 0xFF, 0xE1, byte((len(packet)+2)>>8), byte(len(packet)+2))
		file = append(file, packet...)
		file = append(file, plain[2:]...)
		got := stripped(t, file, "image/jpeg")
		if bytes.Contains(got, []byte("-93.4259758")) {
			t.Errorf("%s: the drone's position survived", attrs)
		}
	}
}

// pngChunk is a PNG chunk of type typ holding data, with its length and
// CRC.
func pngChunk(typ string, data []byte) []byte {
	c := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	c = append(append(c, typ...), data...)
	return binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
}

// afterIHDR is the PNG plain with chunk put right after its IHDR chunk
// (the signature and IHDR take its first 33 bytes).
func afterIHDR(plain, chunk []byte) []byte {
	return append(append(append([]byte{}, plain[:33]...), chunk...), plain[33:]...)
}
