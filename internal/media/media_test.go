package media_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

func TestSniffServesWhatTheBytesAreAndRefusesLies(t *testing.T) {
	allowed := chat.DefaultUploadTypes
	zip := []byte("PK\x03\x04\x14\x00\x06\x00" + string(make([]byte, 40)))
	webm := []byte("\x1A\x45\xDF\xA3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\xf2\x81\x04\x42\xf3\x81\x08\x42\x82\x84webm")
	for _, tc := range []struct {
		name     string
		head     []byte
		declared string
		want     string // "" = refused
		code     chat.Code
	}{
		{"a JPEG as declared", mediatest.JPEG(8, 8), "image/jpeg", "image/jpeg", ""},
		{"a PNG declared as JPEG is served as PNG", mediatest.PNG(8, 8), "image/jpeg", "image/png", ""},
		{"an HTML page declared as image/png", mediatest.HTML(), "image/png", "", ""},
		{"an HTML page declared as text/plain", mediatest.HTML(), "text/plain", "", ""},
		{"an HTML page declared as HTML", mediatest.HTML(), "text/html", "", chat.CodeUnsupported},
		{"random bytes declared as a PNG", bytes.Repeat([]byte{0x01, 0x02}, 100), "image/png", "", ""},
		{"text declared as a video", []byte("#!/bin/sh\nrm -rf /\n"), "video/mp4", "", ""},
		{"a docx is a zip", zip, "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document", ""},
		{"a zip", zip, "application/zip", "application/zip", ""},
		{"a browser's voice note is WebM", webm, "audio/webm", "audio/webm", ""},
		{"a WAV", mediatest.WAV(10), "audio/wav", "audio/wav", ""},
		{"a PDF", mediatest.PDF(), "application/pdf", "application/pdf", ""},
		{"a PDF declared as a PNG", mediatest.PDF(), "image/png", "", ""},
		{"a CSV is text", []byte("a,b\n1,2\n"), "text/csv", "text/csv", ""},
		{"an executable", []byte("MZ\x90\x00\x03" + string(make([]byte, 60))), "application/x-msdownload", "", ""},
		{"a legacy Word file", []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1" + string(make([]byte, 60))), "application/msword", "application/msword", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := media.Sniff(tc.head, tc.declared, allowed)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("accepted as %s", got)
				}
				if tc.code != "" && chat.ErrorCode(err) != tc.code {
					t.Fatalf("refused with %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Sniff = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestADecompressionBombIsRefusedFromItsHeader(t *testing.T) {
	bomb := mediatest.Bomb()
	if len(bomb) > 200 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	if _, err := media.Config(bytes.NewReader(bomb), "image/png", chat.DefaultMaxImagePixels, 0); !errors.Is(err, media.ErrBomb) {
		t.Fatalf("Config: %v, want ErrBomb", err)
	}
	// Thumbnail checks the header before it decodes a pixel: allocating
	// 50,000 × 50,000 × 4 bytes would fail or take minutes.
	if _, _, err := media.Thumbnail(bytes.NewReader(bomb), "image/png", chat.DefaultMaxImagePixels, 0); !errors.Is(err, media.ErrBomb) {
		t.Fatalf("Thumbnail: %v, want ErrBomb", err)
	}
}

func TestLocationIsStrippedInPlaceAndOrientationKept(t *testing.T) {
	photo := mediatest.JPEGWithLocation(64, 48, 6)
	n := len(photo)
	if !bytes.Contains(photo, mediatest.Latitude) {
		t.Fatal("the test photo has no latitude")
	}
	changed, orientation := media.StripLocation(photo, "image/jpeg")
	if !changed || orientation != 6 {
		t.Fatalf("StripLocation = %v, %d; want true, 6", changed, orientation)
	}
	if len(photo) != n {
		t.Fatal("length changed")
	}
	if bytes.Contains(photo, mediatest.Latitude) || bytes.Contains(photo, []byte("N\x00\x00\x00")) {
		t.Fatal("the latitude survived")
	}
	if _, err := jpeg.Decode(bytes.NewReader(photo)); err != nil {
		t.Fatalf("the stripped photo no longer decodes: %v", err)
	}
	if c, o := media.StripLocation(photo, "image/jpeg"); c || o != 6 {
		t.Fatalf("stripping again: %v, %d", c, o)
	}
	if c, _ := media.StripLocation(mediatest.JPEG(8, 8), "image/jpeg"); c {
		t.Fatal("a photo without EXIF changed")
	}
}

func TestThumbnailIsASmallUprightJPEGWithoutMetadata(t *testing.T) {
	photo := mediatest.JPEGWithLocation(1200, 800, 6) // stored landscape, shown portrait
	_, orientation := media.StripLocation(append([]byte{}, photo...), "image/jpeg")
	size, err := media.Config(bytes.NewReader(photo), "image/jpeg", chat.DefaultMaxImagePixels, orientation)
	if err != nil || size.Width != 800 || size.Height != 1200 {
		t.Fatalf("Config = %+v, %v; want 800×1200 as shown", size, err)
	}
	b, th, err := media.Thumbnail(bytes.NewReader(photo), "image/jpeg", chat.DefaultMaxImagePixels, orientation)
	if err != nil {
		t.Fatal(err)
	}
	if th.Width != 213 || th.Height != 320 || th.ContentType != "image/jpeg" || th.Size != int64(len(b)) {
		t.Fatalf("thumbnail %+v", th)
	}
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != 213 {
		t.Fatalf("decode thumbnail: %v", err)
	}
	// Turned a quarter clockwise: the dark top-left corner of the stored
	// picture is now top right.
	if r, _, _, _ := img.At(205, 5).RGBA(); r > 0x3000 {
		t.Errorf("top right is not dark: the thumbnail is not upright")
	}
	if bytes.Contains(b, []byte("Exif")) || bytes.Contains(b, mediatest.Latitude) {
		t.Fatal("the thumbnail carries EXIF")
	}
}

func TestDurationOfWAVOggAndMP4(t *testing.T) {
	wav := mediatest.WAV(1500)
	if d := media.Duration(bytes.NewReader(wav), int64(len(wav)), "audio/wav"); d != 1500 {
		t.Errorf("WAV: %d ms, want 1500", d)
	}
	// An Opus stream: OpusHead (pre-skip 312), then a last page at
	// granule 48000*3+312: three seconds.
	ogg := oggPage(0, append([]byte("OpusHead\x01\x01"), 0x38, 0x01, 0x80, 0xBB, 0, 0, 0, 0, 0))
	ogg = append(ogg, make([]byte, 1000)...)
	ogg = append(ogg, oggPage(48000*3+312, []byte("x"))...)
	if d := media.Duration(bytes.NewReader(ogg), int64(len(ogg)), "audio/ogg"); d != 3000 {
		t.Errorf("Ogg Opus: %d ms, want 3000", d)
	}
	// MP4: ftyp, a large mdat, then moov/mvhd (timescale 1000, 2.5 s).
	var mp4 bytes.Buffer
	mp4.Write(box("ftyp", []byte("isom\x00\x00\x02\x00isommp41")))
	mp4.Write(box("mdat", make([]byte, 100000)))
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], 1000)
	binary.BigEndian.PutUint32(mvhd[16:], 2500)
	mp4.Write(box("moov", box("mvhd", mvhd)))
	if d := media.Duration(bytes.NewReader(mp4.Bytes()), int64(mp4.Len()), "video/mp4"); d != 2500 {
		t.Errorf("MP4: %d ms, want 2500", d)
	}
	if d := media.Duration(bytes.NewReader([]byte("ID3\x03")), 4, "audio/mpeg"); d != 0 {
		t.Errorf("MP3: %d, want 0 (unknown)", d)
	}
}

func oggPage(granule uint64, data []byte) []byte {
	p := []byte("OggS\x00\x00")
	p = binary.LittleEndian.AppendUint64(p, granule)
	p = append(p, make([]byte, 12)...) // serial, page number, checksum
	p = append(p, 1, byte(len(data)))
	return append(p, data...)
}

// readCounter counts the reads at offsets: on an object store each one is
// an HTTP range request of its own.
type readCounter struct {
	r     *bytes.Reader
	reads int
}

func (c *readCounter) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// TestAnMP4OfTinyBoxesCostsAFewReadsNotOnePerBox: the walk to moov reads
// each top-level box's header at its offset; a file of a million empty
// boxes must not cost a million reads (range requests to the object
// store) while an upload completes. Real files have a handful of
// top-level boxes before moov.
func TestAnMP4OfTinyBoxesCostsAFewReadsNotOnePerBox(t *testing.T) {
	var mp4 bytes.Buffer
	ftyp := []byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isommp41")
	mp4.Write(ftyp)
	for i := 0; i < 1<<20/9; i++ {
		mp4.Write([]byte("\x00\x00\x00\x09free\x00")) // 9 bytes: no two reads adjoin
	}
	c := &readCounter{r: bytes.NewReader(mp4.Bytes())}
	_ = media.Duration(c, int64(mp4.Len()), "video/mp4")
	if c.reads > 100 {
		t.Errorf("reading the duration of a 1 MiB MP4 of empty boxes took %d reads", c.reads)
	}
}

// A duration read from a file is what members see as durationMs: a
// crafted header (a 64-bit MP4 duration, an EBML float of 1e30) must not
// overflow into a negative or wrapped number; an absurd one is unknown (0).
func TestADurationReadFromAFileIsNeverNegativeOrWrapped(t *testing.T) {
	mp4 := func(scale uint32, dur uint64) []byte {
		var b bytes.Buffer
		b.Write(box("ftyp", []byte("isom\x00\x00\x02\x00isommp41")))
		mvhd := make([]byte, 100)
		mvhd[0] = 1 // version 1: 64-bit times
		binary.BigEndian.PutUint32(mvhd[20:], scale)
		binary.BigEndian.PutUint64(mvhd[24:], dur)
		b.Write(box("moov", box("mvhd", mvhd)))
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		file []byte
		want int64
	}{
		{"MP4, 64-bit, 9.2e15 ticks of a second", mp4(1, 9_223_372_036_854_776), 0},
		{"MP4, 64-bit, 2^62+1 ticks of a second", mp4(1, 1<<62+1), 0},
		{"MP4, 64-bit, an hour", mp4(90000, 90000*3600), 3_600_000},
		{"WebM, a duration of 1e30 ms", append([]byte("\x1A\x45\xDF\xA3\x80\x15\x49\xA9\x66\x8B\x44\x89\x88"),
			binary.BigEndian.AppendUint64(nil, math.Float64bits(1e30))...), 0},
	} {
		if d := media.Duration(bytes.NewReader(tc.file), int64(len(tc.file)), "video/mp4"); d != tc.want {
			t.Errorf("%s: %d ms, want %d", tc.name, d, tc.want)
		}
	}
}

// box is an MP4 box of type typ holding body.
func box(typ string, body []byte) []byte {
	b := make([]byte, 8+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	copy(b[4:], typ)
	copy(b[8:], body)
	return b
}

// TestStripRemovesLocationAnywhereAndKeepsEveryOtherByte: Strip walks the
// whole file (the stream of an upload), not its head: location after
// large segments, after the image data, in appended pictures goes; the
// output is the input's length however it is read and wherever it ends,
// and the pictures still decode.
func TestStripRemovesLocationAnywhereAndKeepsEveryOtherByte(t *testing.T) {
	for _, tc := range []struct {
		name, ctype string
		file        []byte
	}{
		{"JPEG, EXIF after 300 KiB of ICC", "image/jpeg", mediatest.JPEGWithLocationAfter(200, 100, 6, 300<<10)},
		{"PNG, eXIf after IDAT", "image/png", mediatest.PNGWithLocationAfterIDAT(300, 300, 6)},
		{"WebP, EXIF after the image", "image/webp", mediatest.WebPWithLocation(20, 10, 6, 300<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, err := io.ReadAll(media.Strip(bytes.NewReader(tc.file), tc.ctype))
			if err != nil {
				t.Fatal(err)
			}
			if len(whole) != len(tc.file) {
				t.Fatalf("%d bytes became %d", len(tc.file), len(whole))
			}
			if bytes.Contains(whole, mediatest.Latitude) || bytes.Contains(whole, mediatest.XMPLatitude) {
				t.Fatal("the location survived")
			}
			slow, err := io.ReadAll(media.Strip(iotest.OneByteReader(bytes.NewReader(tc.file)), tc.ctype))
			if err != nil || !bytes.Equal(slow, whole) {
				t.Fatalf("read a byte at a time: %v, equal %v", err, bytes.Equal(slow, whole))
			}
			switch tc.ctype {
			case "image/jpeg":
				_, err = jpeg.Decode(bytes.NewReader(whole))
			case "image/png":
				_, err = png.Decode(bytes.NewReader(whole))
			}
			if err != nil {
				t.Fatalf("the stripped picture no longer decodes: %v", err)
			}
			if _, o := media.StripLocation(append([]byte{}, tc.file...), tc.ctype); o != 6 {
				t.Errorf("orientation %d, want 6", o)
			}
			// Cut anywhere: the bytes there were, stripped or not, then
			// the end; never more or fewer.
			for _, n := range []int{0, 1, 3, 9, 20, 100, 1000, len(tc.file) / 2, len(tc.file) - 1} {
				out, err := io.ReadAll(media.Strip(bytes.NewReader(tc.file[:n]), tc.ctype))
				if err != nil || len(out) != n {
					t.Fatalf("cut at %d: %d bytes, %v", n, len(out), err)
				}
			}
		})
	}
	// A read error is the reader's.
	boom := errors.New("boom")
	r := media.Strip(io.MultiReader(bytes.NewReader(mediatest.JPEGWithLocation(40, 30, 1)[:500]), iotest.ErrReader(boom)), "image/jpeg")
	if _, err := io.ReadAll(r); !errors.Is(err, boom) {
		t.Fatalf("read error: %v, want boom", err)
	}
}

// TestThumbnailCostCoversWhatMakingTheThumbnailTakes: the memory a
// thumbnail takes is known from the image's header before a pixel is
// decoded, so the thumbnailers can stay within their budget: a 16-bit PNG
// takes 8 bytes a pixel, a progressive JPEG its coefficients, a long thin
// PNG the scaler's column buffer. The estimate is never below what
// Thumbnail allocates, nor far above it.
func TestThumbnailCostCoversWhatMakingTheThumbnailTakes(t *testing.T) {
	files := []struct {
		name, ctype string
		data        []byte
	}{
		{"JPEG 4:2:0", "image/jpeg", mediatest.JPEG(1000, 700)},
		{"PNG 8-bit", "image/png", mediatest.PNG(1000, 700)},
		{"PNG 16-bit", "image/png", mediatest.PNG16(1000, 700)},
		{"PNG 2 x 200000", "image/png", mediatest.PNG(2, 200000)},
		{"PNG 200000 x 2", "image/png", mediatest.PNG(200000, 2)},
		{"GIF interlaced", "image/gif", mediatest.InterlacedGIF(2000, 1500)},
		{"GIF", "image/gif", mediatest.GIFWithLocation(1000, 700, 0)},
	}
	// Go's own test pictures: progressive, CMYK and RGB JPEGs.
	if goroot, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		dir := filepath.Join(strings.TrimSpace(string(goroot)), "src", "image", "testdata")
		for _, f := range []string{"video-001.q50.444.progressive.jpeg", "video-001.q50.420.progressive.jpeg",
			"video-001.cmyk.jpeg", "video-001.rgb.jpeg", "video-001.interlaced.png"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				files = append(files, struct {
					name, ctype string
					data        []byte
				}{f, "image/" + strings.TrimPrefix(filepath.Ext(f), "."), b})
			}
		}
	}
	for _, f := range files {
		cost, err := media.ThumbnailCost(bytes.NewReader(f.data), f.ctype)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err = media.Thumbnail(bytes.NewReader(f.data), f.ctype, chat.DefaultMaxImagePixels, 0)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		took := int64(after.TotalAlloc - before.TotalAlloc)
		t.Logf("%s: took %d KiB, estimated %d KiB", f.name, took>>10, cost>>10)
		if took > cost {
			t.Errorf("%s: Thumbnail allocated %d bytes, ThumbnailCost said %d", f.name, took, cost)
		}
		if cost > 3*took+1<<20 {
			t.Errorf("%s: ThumbnailCost said %d bytes, Thumbnail allocated only %d", f.name, cost, took)
		}
	}
}

// mp4Node is a box of an MP4's tree as a player walks it: its offset,
// size, header length and type, moov, trak and udta opened.
type mp4Node struct {
	off, size, hl int64
	typ           string
}

func mp4Tree(t *testing.T, b []byte) []mp4Node {
	t.Helper()
	var nodes []mp4Node
	var walk func(off, end int64, top bool)
	walk = func(off, end int64, top bool) {
		for off+8 <= end {
			n, hl := int64(binary.BigEndian.Uint32(b[off:])), int64(8)
			typ := string(b[off+4 : off+8])
			switch n {
			case 1:
				n, hl = int64(binary.BigEndian.Uint64(b[off+8:])), 16
			case 0:
				n = end - off
			}
			if n < hl || off+n > end {
				t.Fatalf("box %q at %d: size %d, beyond %d", typ, off, n, end)
			}
			nodes = append(nodes, mp4Node{off, n, hl, typ})
			if typ == "moov" && top || typ == "trak" || typ == "udta" {
				walk(off+hl, off+n, false)
			}
			off += n
		}
		if !top && off != end && (end-off != 4 || binary.BigEndian.Uint32(b[off:]) != 0) {
			t.Fatalf("%d bytes left over before %d", end-off, end)
		}
	}
	walk(0, int64(len(b)), true)
	return nodes
}

// TestStripFreesAVideosLocationAndKeepsItsLayout: the recording location
// an iPhone or Android phone writes into a video (udta/©xyz, a track's
// udta/©xyz, 3GPP loci, Apple's meta whose keys name
// com.apple.quicktime.location) is gone, each such box now a free box of
// zeros of the same size, wherever moov is (before or after an mdat, one
// with a 64-bit largesize too) and however large Apple's meta; every other
// byte stays, so the chunk offsets into mdat still hold, the box tree is
// the same and the duration still reads.
func TestStripFreesAVideosLocationAndKeepsItsLayout(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		ctype                string
		qt, moovFirst, large bool
		metaPad              int
	}{
		{"MOV, moov first", "video/quicktime", true, true, false, 0},
		{"MP4, moov after a largesize mdat", "video/mp4", false, false, true, 0},
		{"MP4, moov first, largesize mdat, a 300 KiB meta", "video/mp4", false, true, true, 300 << 10},
		{"MOV declared as MP4, moov after mdat, a 300 KiB meta", "video/mp4", true, false, false, 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := mediatest.MP4WithLocation(tc.qt, tc.moovFirst, tc.large, 200<<10, tc.metaPad)
			// What it should become: the location boxes freed.
			want := append([]byte{}, file...)
			located := 0
			for _, n := range mp4Tree(t, file) {
				box := want[n.off : n.off+n.size]
				if n.typ == "\xa9xyz" || n.typ == "loci" ||
					n.typ == "meta" && bytes.Contains(box, []byte("com.apple.quicktime.location")) {
					copy(box[4:], "free")
					clear(box[n.hl:])
					located++
				}
			}
			if located != 4 {
				t.Fatalf("the test video has %d location boxes, want 4", located)
			}
			got := strippedTo(t, file, tc.ctype, want)
			if bytes.Contains(got, mediatest.VideoLocation) || bytes.Contains(got, mediatest.LociName) ||
				bytes.Contains(got, []byte("com.apple.quicktime.location")) {
				t.Fatal("the location survived")
			}
			if a, b := mp4Tree(t, file), mp4Tree(t, got); len(a) != len(b) {
				t.Fatalf("%d boxes became %d", len(a), len(b))
			}
			if d := media.Duration(bytes.NewReader(got), int64(len(got)), tc.ctype); d != 2500 {
				t.Errorf("duration %d ms, want 2500", d)
			}
		})
	}
}

// TestStripBlanksPlaceNamesAndKeepsTheCaption: a photo without
// coordinates can still say where it was taken, by name (an editor's XMP
// photoshop:City, IPTC's Location; the IPTC-IIM City, State and Country
// of APP13): those go, the caption stays, and the picture still decodes
// to the same length.
func TestStripBlanksPlaceNamesAndKeepsTheCaption(t *testing.T) {
	photo := mediatest.JPEGWithPlaceNames(40, 30)
	if n := bytes.Count(photo, mediatest.PlaceName); n < 3 {
		t.Fatalf("the test photo names its city %d times, want 3 or more", n)
	}
	got := stripped(t, photo, "image/jpeg")
	for _, place := range [][]byte{mediatest.PlaceName, []byte("Alfama"), []byte("Portugal")} {
		if bytes.Contains(got, place) {
			t.Errorf("%q survived", place)
		}
	}
	if !bytes.Contains(got, mediatest.Caption) {
		t.Error("the caption went too")
	}
	if _, err := jpeg.Decode(bytes.NewReader(got)); err != nil {
		t.Fatalf("the stripped picture no longer decodes: %v", err)
	}
}

// stripped strips file as ctype, read whole and a byte at a time, and
// checks that both give the same bytes, as many as the file has.
func stripped(t *testing.T, file []byte, ctype string) []byte {
	t.Helper()
	got, err := io.ReadAll(media.Strip(bytes.NewReader(file), ctype))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(file) {
		t.Fatalf("%d bytes became %d", len(file), len(got))
	}
	slow, err := io.ReadAll(media.Strip(iotest.OneByteReader(bytes.NewReader(file)), ctype))
	if err != nil || !bytes.Equal(slow, got) {
		t.Fatalf("read a byte at a time: %v, equal %v", err, bytes.Equal(slow, got))
	}
	return got
}

// strippedTo strips file as ctype and checks what every stripping must
// hold: the length kept, want byte for byte, the same bytes read a byte at
// a time, and a file cut short stripped to its own length. It returns the
// stripped bytes.
func strippedTo(t *testing.T, file []byte, ctype string, want []byte) []byte {
	t.Helper()
	got := stripped(t, file, ctype)
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("byte %d of %d is %#x, want %#x", i, len(got), got[i], want[i])
			}
		}
	}
	for _, n := range []int{0, 1, 3, 5, 7, 9, 20, 40, 100, 1000, len(file) / 2, len(file) - 1} {
		out, err := io.ReadAll(media.Strip(bytes.NewReader(file[:n]), ctype))
		if err != nil || len(out) != n {
			t.Fatalf("cut at %d: %d bytes, %v", n, len(out), err)
		}
	}
	return got
}

// TestStripBlanksAGIFsLocationAndKeepsItsFrames: a GIF (served inline and
// made a thumbnail like any picture) carrying an XMP packet with a GPS
// position, as exiftool or an editor exporting a photo writes it, is
// stored without it, wherever it is and however large, its frames, loop
// and length unchanged.
func TestStripBlanksAGIFsLocationAndKeepsItsFrames(t *testing.T) {
	for _, pad := range []int{400, 300 << 10} {
		file := mediatest.GIFWithLocation(30, 20, pad)
		before, err := gif.DecodeAll(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("the test GIF does not decode: %v", err)
		}
		got, err := io.ReadAll(media.Strip(bytes.NewReader(file), "image/gif"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(got, mediatest.XMPLatitude) || bytes.Contains(got, []byte("GPS")) {
			t.Fatalf("pad %d: the location survived", pad)
		}
		strippedTo(t, file, "image/gif", got)
		after, err := gif.DecodeAll(bytes.NewReader(got))
		if err != nil {
			t.Fatalf("pad %d: the stripped GIF no longer decodes: %v", pad, err)
		}
		if len(after.Image) != len(before.Image) || after.LoopCount != before.LoopCount {
			t.Fatalf("pad %d: %d frames looping %d, want %d looping %d", pad, len(after.Image), after.LoopCount, len(before.Image), before.LoopCount)
		}
		for i := range after.Image {
			if !bytes.Equal(after.Image[i].Pix, before.Image[i].Pix) {
				t.Fatalf("pad %d: frame %d changed", pad, i)
			}
		}
	}
	// A GIF without metadata goes through byte for byte.
	var plain bytes.Buffer
	if err := gif.Encode(&plain, image.NewPaletted(image.Rect(0, 0, 8, 8), color.Palette{color.White, color.Black}), nil); err != nil {
		t.Fatal(err)
	}
	for _, read := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
		got, err := io.ReadAll(media.Strip(read(bytes.NewReader(plain.Bytes())), "image/gif"))
		if err != nil || !bytes.Equal(got, plain.Bytes()) {
			t.Fatalf("a plain GIF changed: %v, equal %v", err, bytes.Equal(got, plain.Bytes()))
		}
	}
}

// TestAThumbnailTakesNoMoreThanItsCostWhateverMetadataPrecedesThePicture:
// a small picture after megabytes of metadata (a phone's depth map in
// extended XMP, a large ICC profile, or padding an uploader chose) is
// decoded within what ThumbnailCost says, which the thumbnailers' budget
// holds: the metadata is read past, never kept.
func TestAThumbnailTakesNoMoreThanItsCostWhateverMetadataPrecedesThePicture(t *testing.T) {
	file := mediatest.JPEGWithLocationAfter(200, 100, 1, 8<<20)
	cost, err := media.ThumbnailCost(bytes.NewReader(file), "image/jpeg")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, th, err := media.Thumbnail(bytes.NewReader(file), "image/jpeg", chat.DefaultMaxImagePixels, 0)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if th.Width != 200 || th.Height != 100 {
		t.Fatalf("thumbnail %d x %d, want 200 x 100", th.Width, th.Height)
	}
	if took := int64(after.TotalAlloc - before.TotalAlloc); took > cost {
		t.Fatalf("Thumbnail allocated %d KiB, ThumbnailCost said %d KiB", took>>10, cost>>10)
	}
}

// TestWhatRemainsOfAGIFsXMPPacketDependsOnItsLengthAlone: the packet's
// bytes, read by decoders as sub-block lengths, do not survive as the
// lengths of the blanked extension's sub-blocks: two packets of the same
// length leave the same bytes.
func TestWhatRemainsOfAGIFsXMPPacketDependsOnItsLengthAlone(t *testing.T) {
	for _, pad := range []int{0, 1, 200, 300 << 10} {
		file := mediatest.GIFWithLocation(30, 20, pad)
		start := bytes.Index(file, []byte("XMP DataXMP")) + len("XMP DataXMP")
		end := bytes.Index(file[start:], []byte{0x01, 0xFF, 0xFE, 0xFD}) + start
		other := append([]byte{}, file...)
		for i := start; i < end; i++ {
			other[i] ^= 1 // another packet, as long
		}
		a, err := io.ReadAll(media.Strip(bytes.NewReader(file), "image/gif"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(media.Strip(iotest.OneByteReader(bytes.NewReader(other)), "image/gif"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("pad %d: two packets of %d bytes left different bytes", pad, end-start)
		}
		if _, err := gif.DecodeAll(bytes.NewReader(b)); err != nil {
			t.Fatalf("pad %d: the stripped GIF no longer decodes: %v", pad, err)
		}
	}
}

// TestThumbnailCostReadsPastMegabytesOfMetadataWithoutKeepingThem: the
// estimate is made before the budget is taken, so it must be cheap
// itself: a picture after megabytes of metadata costs what the same
// picture without them does, and finding that out holds no copy of the
// metadata.
func TestThumbnailCostReadsPastMegabytesOfMetadataWithoutKeepingThem(t *testing.T) {
	plain, err := media.ThumbnailCost(bytes.NewReader(mediatest.JPEG(200, 100)), "image/jpeg")
	if err != nil {
		t.Fatal(err)
	}
	file := mediatest.JPEGWithLocationAfter(200, 100, 1, 8<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cost, err := media.ThumbnailCost(bytes.NewReader(file), "image/jpeg")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if cost != plain {
		t.Errorf("cost %d, the same picture without metadata costs %d", cost, plain)
	}
	if took := int64(after.TotalAlloc - before.TotalAlloc); took > 2<<20 {
		t.Errorf("ThumbnailCost allocated %d KiB for a file of %d KiB", took>>10, len(file)>>10)
	}
	// Go's progressive, CMYK and RGB pictures after 1 MiB of metadata
	// cost what they cost without.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skip(err)
	}
	for _, f := range []string{"video-001.q50.444.progressive.jpeg", "video-001.cmyk.jpeg", "video-001.rgb.jpeg"} {
		b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "src", "image", "testdata", f))
		if err != nil {
			t.Skip(err)
		}
		want, err := media.ThumbnailCost(bytes.NewReader(b), "image/jpeg")
		if err != nil {
			t.Fatal(err)
		}
		padded := append([]byte{}, b[:2]...)
		for range 20 {
			seg := append([]byte{0xFF, 0xE2, 0xFD, 0xEA}, "ICC_PROFILE\x00"...)
			padded = append(padded, append(seg, make([]byte, 0xFDEA-2-12)...)...)
		}
		padded = append(padded, b[2:]...)
		if got, err := media.ThumbnailCost(bytes.NewReader(padded), "image/jpeg"); err != nil || got != want {
			t.Errorf("%s after 1 MiB of metadata: cost %d (%v), want %d", f, got, err, want)
		}
	}
}
