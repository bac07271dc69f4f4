package media

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
)

// HeadLen is how much of a file is held to sniff it (and, in measure, to
// read an image's EXIF orientation).
const HeadLen = 256 << 10

// StripLocation removes location data from head, the start of an image
// file (or all of it), in place, as Strip does: a segment or chunk cut
// off by head's end is left as it is. It reports whether anything
// changed and the EXIF orientation of the picture (0 when there is none).
func StripLocation(head []byte, t string) (changed bool, orientation int) {
	s := newStripper(bytes.NewReader(head), t)
	if s == nil {
		return false, 0
	}
	out, _ := io.ReadAll(s) // a bytes.Reader ends with io.EOF only
	changed = !bytes.Equal(out, head)
	copy(head, out)
	return changed, s.orientation
}

// Orientation is the EXIF orientation of the picture in a file of size
// bytes (0 when it has none), head its first bytes, which it strips in
// place as StripLocation does: StripLocation's, or, for a WebP whose
// EXIF chunk lies beyond head (the format puts it after the image data),
// that chunk's, found by reading at most webpMaxChunks chunk headers at
// their offsets of r (each a range request to an object store).
func Orientation(r io.ReaderAt, size int64, t string, head []byte) int {
	_, o := StripLocation(head, t)
	if o != 0 || t != "image/webp" || size <= int64(len(head)) {
		return o
	}
	var h [8]byte
	for off, k := int64(12), 0; k < webpMaxChunks && off+8 <= size; k++ {
		if _, err := r.ReadAt(h[:], off); err != nil {
			return 0
		}
		n := int64(binary.LittleEndian.Uint32(h[4:]))
		if string(h[:4]) == "EXIF" {
			if n > maxUnit || n > size-off-8 {
				return 0
			}
			b := make([]byte, n)
			if _, err := r.ReadAt(b, off+8); err != nil {
				return 0
			}
			_, o := stripTIFF(bytes.TrimPrefix(b, []byte("Exif\x00\x00")))
			return o
		}
		off += 8 + n + n&1
	}
	return 0
}

// webpMaxChunks bounds the chunks Orientation walks to a WebP's EXIF:
// a still picture has a handful before it (VP8X, ICCP, ALPH, VP8), an
// animation one a frame.
const webpMaxChunks = 64

// Strip returns r's bytes with the location data of a JPEG, PNG or WebP
// (t) removed wherever the file keeps it, the same length, everything else
// as it was: every EXIF GPS directory (JPEG APP1, PNG eXIf in any case,
// WebP EXIF; whichever directory points to it) is emptied and every byte
// of its values zeroed (a PNG's compressed zxIf is zeroed whole); an XMP
// packet that mentions GPS or a place name (locationWords) is blanked
// (JPEG APP1, extended XMP from its first mention, or its first part out
// of the packet's order, on; PNG iTXt, tEXt, tXMP, after IEND too; WebP
// XMP), and so are the place names of a JPEG's IPTC-IIM block (APP13; the
// EXIF and XMP copies its Photoshop resources hold are stripped too), as
// are PNG text chunks whose content cannot be read without inflating it
// (compressed XMP, ImageMagick's raw EXIF profiles) and metadata chunks
// too large to hold (over maxUnit). A JPEG's segments are walked to the
// end of the file, between scans too, and pictures appended after its end
// (a phone's Multi-Picture previews) are stripped as well, and so is a
// video appended after it (a motion photo's MP4, as a video is). The rest
// of the EXIF data stays, orientation included, so photos keep standing
// upright.
//
// An audio or video file in the ISO base media format (MP4, MOV, 3GP, M4A,
// whatever type it was declared as) loses its recording location: the
// boxes that hold it (moov/udta/©xyz, 3GPP loci, those of a track's udta,
// an XMP packet that mentions a location — MP4's uuid box, a MOV's
// udta/XMP_, one over maxUnit whole unread —, and Apple's meta whose keys
// name com.apple.quicktime.location — that meta whole, with the rest of
// Apple's metadata in it; a meta over maxUnit is freed whole unread)
// become free boxes of zeros of the same size, so the file's layout, and
// every chunk offset into mdat, stays. A HEIF image (HEIC, AVIF) loses the
// GPS directory of its Exif item and an XMP item that mentions a location,
// the items found through the meta's iinf and iloc, in place wherever they
// are after the meta or in it (heif.go). A WebM or Matroska file (an audio
// or video type) loses the SimpleTags of its Tags whose names say a
// location, made Void elements of their size, after a Cluster of unknown
// size too (mkv.go). A GIF loses its XMP
// packet (an application extension "XMP DataXMP", where exiftool and
// editors write GPS; GIF has no EXIF), blanked whole as it streams, its
// frames kept. Other types are returned as they are. Memory: a read buffer
// and one segment, chunk, box, Tags element or run of items (of WebM
// elements: a read buffer's) of at most maxUnit.
func Strip(r io.Reader, t string) io.Reader {
	if s := newStripper(r, t); s != nil {
		return s
	}
	return r
}

// maxUnit bounds a PNG or WebP metadata chunk held whole to be stripped
// (a JPEG segment is at most 64 KiB).
const maxUnit = 256 << 10

// stripper is Strip's reader: step produces the next bytes (out) from
// the file as it is walked, segment by segment.
type stripper struct {
	br   *bufio.Reader
	step func(*stripper) error
	out  []byte // produced, not read yet
	err  error  // the end (after out)
	unit []byte // the segment or chunk being stripped

	// pass: left more bytes go through as they are (zero: as zeros,
	// crc updated), then step is then.
	left int64
	zero bool
	crc  uint32
	then func(*stripper) error

	pictures int // JPEG: pictures begun (appended previews follow the first)
	// JPEG's extended XMP: once a part mentions a location, or comes
	// out of the packet's order, every part after it is blanked
	// (xmpExtended); until then the parts passed are the packet's
	// first xmpNext bytes, of GUID xmpGUID, ending with xmpTail.
	xmpExtended bool
	xmpTail     []byte
	xmpGUID     []byte
	xmpNext     uint32
	orientation int
	oriented    bool

	// MP4 (and Matroska): the offset of the next byte walked, and the
	// ends of the boxes (the Segment) it is in (innermost last); inJPEG:
	// the MP4 is a video appended to a JPEG (a motion photo).
	pos    int64
	boxes  []mp4Open
	hdr    [16]byte
	inJPEG bool

	// HEIF: what is to be done to the bytes after the meta (by offset),
	// and the metadata items stripped so far.
	heifActs []heifAction
	heifN    int

	// GIF: bytes of an XMP extension walked, owed as zeros.
	gifOwed int64

	// Matroska: the SimpleTag of unknown size walked names a location,
	// or has not named itself yet.
	mkvLocated bool
}

// mp4Open is a box the MP4 walk is in: where it ends, its type.
type mp4Open struct {
	end int64
	typ string
}

func newStripper(r io.Reader, t string) *stripper {
	s := &stripper{br: bufio.NewReaderSize(r, 32<<10)}
	switch t {
	case "image/jpeg":
		s.step = (*stripper).jpegStart
	case "image/png":
		s.step = (*stripper).pngStart
	case "image/webp":
		s.step = (*stripper).webpStart
	case "image/gif":
		s.step = (*stripper).gifStart
	default:
		switch {
		case IsHEIF(t):
			s.step = (*stripper).heifStart
		case isAV(t):
			s.step = (*stripper).avStart
		default:
			return nil
		}
	}
	return s
}

func (s *stripper) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.step(s)
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// avail returns the bytes buffered, reading more when there are none.
func (s *stripper) avail() ([]byte, error) {
	if s.br.Buffered() == 0 {
		if _, err := s.br.Peek(1); err != nil {
			return nil, err
		}
	}
	return s.br.Peek(s.br.Buffered())
}

// emit passes n buffered bytes through as they are.
func (s *stripper) emit(b []byte, n int) {
	s.out = b[:n]
	_, _ = s.br.Discard(n)
}

// whole reads the next n bytes into unit; at the end of the file what
// there was goes out as it was, and the end (io.EOF) follows.
func (s *stripper) whole(n int) ([]byte, error) {
	if cap(s.unit) < n {
		s.unit = make([]byte, n)
	}
	b := s.unit[:n]
	m, err := io.ReadFull(s.br, b)
	if err != nil {
		s.out = b[:m]
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return nil, err
	}
	return b, nil
}

// rest passes everything left through.
func (s *stripper) rest() error {
	b, err := s.avail()
	if err != nil {
		return err
	}
	s.emit(b, len(b))
	return nil
}

// pass passes s.left bytes through (as zeros when s.zero), then goes on
// with s.then.
func (s *stripper) pass() error {
	if s.left == 0 {
		s.step, s.zero = s.then, false
		return nil
	}
	b, err := s.avail()
	if err != nil {
		return err
	}
	n := int(min(int64(len(b)), s.left))
	s.left -= int64(n)
	if !s.zero {
		s.emit(b, n)
		return nil
	}
	if cap(s.unit) < n {
		s.unit = make([]byte, n)
	}
	z := s.unit[:n]
	clear(z)
	s.crc = crc32.Update(s.crc, crc32.IEEETable, z)
	s.out = z
	_, _ = s.br.Discard(n)
	return nil
}

func (s *stripper) passThen(n int64, zero bool, then func(*stripper) error) {
	s.left, s.zero, s.then, s.step = n, zero, then, (*stripper).pass
}

// exif strips an EXIF TIFF block (true when it changed) and keeps the
// first picture's orientation.
func (s *stripper) exif(tiff []byte) bool {
	changed, o := stripTIFF(tiff)
	if !s.oriented && s.pictures <= 1 {
		s.orientation, s.oriented = o, true
	}
	return changed
}

// peek returns the next n bytes; short of them (the end of the file, or a
// read error to come), the rest of the file goes through as it is and
// peek returns nil.
func (s *stripper) peek(n int) []byte {
	b, err := s.br.Peek(n)
	if err != nil {
		s.step = (*stripper).rest
		return nil
	}
	return b
}

// begin passes a format's n-byte signature through and goes on with next
// when is says the file starts with it; any other file goes through as it
// is.
func (s *stripper) begin(n int, is func([]byte) bool, next func(*stripper) error) error {
	b := s.peek(n)
	if b == nil {
		return nil
	}
	if !is(b) {
		s.step = (*stripper).rest
		return nil
	}
	s.emit(b, n)
	s.step = next
	return nil
}

// JPEG: marker segments (APP1 holds EXIF and XMP) to the end of the file.

// untilMarker passes the bytes of b before its first 0xFF through (what
// decoders skip between JPEG segments, or entropy-coded data) and reports
// whether there were any.
func (s *stripper) untilMarker(b []byte) bool {
	n := bytes.IndexByte(b, 0xFF)
	if n == 0 {
		return false
	}
	if n < 0 {
		n = len(b)
	}
	s.emit(b, n)
	return true
}

func (s *stripper) jpegStart() error {
	return s.begin(2, func(b []byte) bool {
		if b[0] != 0xFF || b[1] != 0xD8 {
			return false
		}
		s.pictures++
		s.xmpExtended, s.xmpTail, s.xmpGUID, s.xmpNext = false, nil, nil, 0
		return true
	}, (*stripper).jpegMarker)
}

func (s *stripper) jpegMarker() error {
	b, err := s.avail()
	if err != nil {
		return err
	}
	if s.untilMarker(b) {
		return nil // bytes between segments, which decoders skip
	}
	if b = s.peek(2); b == nil {
		return nil
	}
	switch m := b[1]; {
	case m == 0xFF: // fill byte
		s.emit(b, 1)
	case m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7):
		s.emit(b, 2)
	case m == 0xD9: // the end of a picture; previews may follow
		s.emit(b, 2)
		s.step = (*stripper).jpegTrailer
	default:
		if b = s.peek(4); b == nil {
			return nil
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < 2 {
			s.emit(b, 2)
			return nil
		}
		seg, err := s.whole(2 + n)
		if err != nil {
			return err
		}
		switch m {
		case 0xE1:
			s.app1(seg[4:])
		case 0xED:
			app13(seg[4:])
		}
		s.out = seg
		if m == 0xDA {
			s.step = (*stripper).jpegScan
		}
	}
	return nil
}

const (
	xmpNS         = "http://ns.adobe.com/xap/1.0/\x00"
	xmpExtendedNS = "http://ns.adobe.com/xmp/extension/\x00"
)

// locationWords are what an XMP packet holding a location mentions: GPS
// coordinates (exif:GPSLatitude, ...; a DJI drone's
// drone-dji:GpsLatitude, GpsLongitude or GpsLongtitude) and the names of
// places that photo editors and catalogues fill in (Photoshop's and
// IPTC's City, State, Country, Location, LocationCreated, LocationShown,
// ...). A packet that mentions one is blanked whole.
var locationWords = [][]byte{
	[]byte("GPS"), []byte("GpsLat"), []byte("GpsLong"),
	[]byte("photoshop:City"), []byte("photoshop:State"), []byte("photoshop:Country"),
	[]byte("Iptc4xmpCore:Location"), []byte("Iptc4xmpCore:CountryCode"),
	[]byte("Iptc4xmpExt:Location"), []byte("Iptc4xmpExt:City"), []byte("Iptc4xmpExt:Sublocation"),
	[]byte("Iptc4xmpExt:ProvinceState"), []byte("Iptc4xmpExt:CountryName"),
}

// mentionsLocation says b holds one of locationWords.
func mentionsLocation(b []byte) bool {
	for _, w := range locationWords {
		if bytes.Contains(b, w) {
			return true
		}
	}
	return false
}

// wordTail is how much of a part of an extended XMP packet is kept to
// find a word that straddles it and the next part.
var wordTail = slices.MaxFunc(locationWords, func(a, b []byte) int { return len(a) - len(b) })

// app13 blanks the place names of the IPTC-IIM block in a JPEG's APP13
// (Photoshop's image resource 0x0404): the datasets City, Sublocation,
// Province/State, Country code and Country (2:90, 2:92, 2:95, 2:100,
// 2:101) become spaces of the same length; captions, keywords and
// credits stay. The copies of the EXIF (0x0422, 0x0423) and XMP (0x0424)
// the resources may hold are stripped as those are.
func app13(seg []byte) {
	b, ok := bytes.CutPrefix(seg, []byte("Photoshop 3.0\x00"))
	for ok && len(b) >= 12 && string(b[:4]) == "8BIM" {
		id := binary.BigEndian.Uint16(b[4:])
		name := 1 + int(b[6]) // a Pascal string, padded to an even length
		name += name & 1
		if 6+name+4 > len(b) {
			return
		}
		size := int(binary.BigEndian.Uint32(b[6+name:]))
		data := b[6+name+4:]
		if size > len(data) {
			return
		}
		switch r := data[:size]; id {
		case 0x0404:
			iimBlankPlaces(r)
		case 0x0422, 0x0423: // copies of the EXIF
			stripTIFF(bytes.TrimPrefix(r, []byte("Exif\x00\x00")))
		case 0x0424: // a copy of the XMP packet
			if mentionsLocation(r) {
				blank(r)
			}
		}
		b = data[min(len(data), size+size&1):]
	}
}

// iimBlankPlaces walks IPTC-IIM datasets (0x1C, record, dataset, a 2-byte
// length; an extended length is not used by text datasets and ends the
// walk).
func iimBlankPlaces(b []byte) {
	for len(b) >= 5 && b[0] == 0x1C {
		n := int(binary.BigEndian.Uint16(b[3:]))
		if n&0x8000 != 0 || 5+n > len(b) {
			return
		}
		if b[1] == 2 && slices.Contains([]byte{90, 92, 95, 100, 101}, b[2]) {
			blank(b[5 : 5+n])
		}
		b = b[5+n:]
	}
}

// app1 strips an APP1 segment's EXIF or XMP.
func (s *stripper) app1(seg []byte) {
	switch {
	case bytes.HasPrefix(seg, []byte("Exif\x00\x00")):
		s.exif(seg[6:])
	case bytes.HasPrefix(seg, []byte(xmpNS)):
		if mentionsLocation(seg) {
			blank(seg[len(xmpNS):])
		}
	case bytes.HasPrefix(seg, []byte(xmpExtendedNS)) && len(seg) > len(xmpExtendedNS)+40:
		// A part of a long XMP packet (after a GUID, its length and
		// offset): a mention of a location may straddle two parts, and
		// its value follows it, so every part from the first mention on
		// is blanked. Readers join the parts by their offsets, which
		// the segments' order need not follow: a part that does not
		// continue the ones passed (a value whose name comes later) is
		// blanked with all after it.
		h := seg[len(xmpExtendedNS):]
		guid, off, part := h[:32], binary.BigEndian.Uint32(h[36:]), h[40:]
		if s.xmpGUID == nil {
			s.xmpGUID = append([]byte{}, guid...)
		}
		inOrder := off == s.xmpNext && bytes.Equal(guid, s.xmpGUID)
		s.xmpNext += uint32(len(part))
		keep := len(wordTail) - 1
		mentions := mentionsLocation(append(s.xmpTail, part[:min(len(part), keep)]...)) || mentionsLocation(part)
		s.xmpTail = append(s.xmpTail[:0], part[max(0, len(part)-keep):]...)
		if s.xmpExtended || mentions || !inOrder {
			s.xmpExtended = true
			blank(part)
		}
	}
}

// jpegScan passes entropy-coded data through to the next marker.
func (s *stripper) jpegScan() error {
	b, err := s.avail()
	if err != nil {
		return err
	}
	if s.untilMarker(b) {
		return nil
	}
	if b = s.peek(2); b == nil {
		return nil
	}
	switch m := b[1]; {
	case m == 0x00 || (m >= 0xD0 && m <= 0xD7): // stuffing, restart
		s.emit(b, 2)
	case m == 0xFF:
		s.emit(b, 1)
	default:
		s.step = (*stripper).jpegMarker
	}
	return nil
}

// jpegTrailer passes what follows a picture through up to the next
// picture (FF D8 FF), which is stripped as the first was, or to a video
// (an MP4 whose first box is its ftyp: a motion photo's), stripped as a
// video is.
func (s *stripper) jpegTrailer() error {
	b, err := s.avail()
	if err != nil {
		return err
	}
	if len(b) < 8 {
		if b = s.peek(8); b == nil {
			return nil // the end: too short for a picture or a video
		}
	}
	n := bytes.Index(b, []byte{0xFF, 0xD8, 0xFF})
	if v := bytes.Index(b[4:], []byte("ftyp")); v >= 0 && (n < 0 || v < n) {
		if v > 0 {
			s.emit(b, v)
			return nil
		}
		s.pos, s.boxes, s.inJPEG = 0, s.boxes[:0], true
		s.step = (*stripper).mp4Box
		return nil
	}
	switch {
	case n == 0:
		s.step = (*stripper).jpegStart
	case n > 0:
		s.emit(b, n)
	default:
		s.emit(b, len(b)-7) // a picture or a video may start in the last seven
	}
	return nil
}

// PNG: chunks to the end of the file (after IEND too); eXIf (zxIf) and
// the text chunks (XMP) are stripped.

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

func (s *stripper) pngStart() error {
	return s.begin(8, func(b []byte) bool { return bytes.Equal(b, pngSignature) }, (*stripper).pngChunk)
}

func (s *stripper) pngChunk() error {
	h := s.peek(8)
	if h == nil {
		return nil
	}
	n := int64(binary.BigEndian.Uint32(h))
	typ := string(h[4:8])
	if n > 1<<31-1 {
		s.step = (*stripper).rest
		return nil
	}
	// ExifTool reads EXIF from a chunk of any case of eXIf (exIf, as
	// some writers spelled it) and from zxIf, once proposed for
	// compressed EXIF.
	switch {
	case strings.EqualFold(typ, "eXIf"):
		typ = "eXIf"
	case strings.EqualFold(typ, "zxIf"):
		typ = "zxIf"
	}
	switch typ {
	case "zxIf":
		// Compressed: zeroed as it passes, its CRC made anew.
		s.crc = crc32.ChecksumIEEE(h[4:8])
		s.emit(h, 8)
		s.passThen(n, true, (*stripper).pngCRC)
	case "eXIf", "iTXt", "tEXt", "zTXt", "tXMP":
		if 12+n > maxUnit {
			// Too large to hold: zeroed as it passes, its CRC made anew.
			s.crc = crc32.ChecksumIEEE(h[4:8])
			s.emit(h, 8)
			s.passThen(n, true, (*stripper).pngCRC)
			return nil
		}
		c, err := s.whole(int(12 + n))
		if err != nil {
			return err
		}
		if s.pngMeta(typ, c[8:8+n]) {
			binary.BigEndian.PutUint32(c[8+n:], crc32.ChecksumIEEE(c[4:8+n]))
		}
		s.out = c
	case "IEND":
		// ExifTool reads what follows as chunks too.
		s.passThen(12+n, false, (*stripper).pngChunk)
	default:
		s.passThen(12+n, false, (*stripper).pngChunk)
	}
	return nil
}

// pngCRC writes the CRC of a chunk zeroed as it passed.
func (s *stripper) pngCRC() error {
	c, err := s.whole(4)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(c, s.crc)
	s.out = c
	s.step = (*stripper).pngChunk
	return nil
}

// pngMeta strips a metadata chunk's data; true when it changed.
func (s *stripper) pngMeta(typ string, data []byte) bool {
	switch typ {
	case "eXIf":
		return s.exif(data)
	case "tXMP": // XMP where a 2001 draft put it
		if mentionsLocation(data) {
			blank(data)
			return true
		}
		return false
	}
	keyword, text, _ := bytes.Cut(data, []byte{0})
	compressed := typ == "zTXt" || (typ == "iTXt" && len(text) > 0 && text[0] != 0)
	switch {
	case bytes.Equal(keyword, []byte("XML:com.adobe.xmp")):
		if compressed || mentionsLocation(text) {
			blank(data[len(keyword):])
			return true
		}
	case bytes.HasPrefix(keyword, []byte("Raw profile type ")):
		// ImageMagick's hex-encoded EXIF or XMP.
		blank(data[len(keyword):])
		return true
	}
	return false
}

// WebP: RIFF chunks; EXIF and XMP come after the image data.

func (s *stripper) webpStart() error {
	return s.begin(12, func(b []byte) bool { return string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" }, (*stripper).webpChunk)
}

func (s *stripper) webpChunk() error {
	h := s.peek(8)
	if h == nil {
		return nil
	}
	typ := string(h[:4])
	n := int64(binary.LittleEndian.Uint32(h[4:]))
	n += n & 1
	if typ != "EXIF" && typ != "XMP " {
		s.passThen(8+n, false, (*stripper).webpChunk)
		return nil
	}
	if 8+n > maxUnit {
		s.emit(h, 8)
		s.passThen(n, true, (*stripper).webpChunk)
		return nil
	}
	c, err := s.whole(int(8 + n))
	if err != nil {
		return err
	}
	data := c[8:]
	if typ == "EXIF" {
		s.exif(bytes.TrimPrefix(data, []byte("Exif\x00\x00")))
	} else if mentionsLocation(data) {
		blank(data)
	}
	s.out = c
	return nil
}

// GIF: blocks to the trailer, every extension's and image's data
// sub-blocks walked (that is where the next block starts). GIF has no
// EXIF: what carries a location is an XMP packet, which exiftool and
// Adobe's tools write raw in an application extension "XMP DataXMP"
// (the packet's own bytes read as sub-block lengths, a magic trailer
// leading any of them to the terminator). Walked as decoders walk it, it
// is blanked whole as it streams, never held: the extension becomes a
// comment of spaces and zeros (gifBlanked), so the file's length and
// every frame stay.

func (s *stripper) gifStart() error {
	b := s.peek(13)
	if b == nil {
		return nil
	}
	if string(b[:6]) != "GIF87a" && string(b[:6]) != "GIF89a" {
		s.step = (*stripper).rest
		return nil
	}
	s.passThen(13+gifTable(b[10]), false, (*stripper).gifBlock)
	return nil
}

// gifTable is the size of the colour table a screen's or an image's
// flags announce.
func gifTable(flags byte) int64 {
	if flags&0x80 == 0 {
		return 0
	}
	return 3 << (flags&7 + 1)
}

// gifXMP starts the application extension holding an XMP packet.
var gifXMP = []byte("\x21\xFF\x0BXMP DataXMP")

func (s *stripper) gifBlock() error {
	b := s.peek(1)
	if b == nil {
		return nil
	}
	switch b[0] {
	case 0x2C: // an image: descriptor, colour table, LZW code size, data
		if b = s.peek(10); b == nil {
			return nil
		}
		s.passThen(10+gifTable(b[9])+1, false, (*stripper).gifData)
	case 0x21:
		// Fewer bytes than an XMP extension's header left: the rest
		// holds none.
		if b = s.peek(len(gifXMP)); b == nil {
			return nil
		}
		if !bytes.Equal(b, gifXMP) {
			s.emit(b, 2)
			s.step = (*stripper).gifData
			return nil
		}
		// A comment whose first sub-block is 11 spaces.
		h := s.hdr[:len(gifXMP)]
		copy(h, b)
		h[1] = 0xFE
		blank(h[3:])
		s.out = h
		_, _ = s.br.Discard(len(h))
		s.step = (*stripper).gifBlanked
	default: // the trailer, or what no decoder reads on
		s.step = (*stripper).rest
	}
	return nil
}

// gifData passes data sub-blocks through to their terminator.
func (s *stripper) gifData() error {
	b := s.peek(1)
	if b == nil {
		return nil
	}
	if b[0] == 0 {
		s.emit(b, 1)
		s.step = (*stripper).gifBlock
		return nil
	}
	s.passThen(1+int64(b[0]), false, (*stripper).gifData)
	return nil
}

// gifBlanked walks the XMP extension's sub-blocks as decoders do, to
// their terminator, and writes in their place zeros in sub-blocks of its
// own, 255 bytes long but for the last one or two: the packet's bytes,
// which a decoder reads as the lengths, do not survive as lengths either.
// The bytes walked and not written yet (gifOwed) stay under 514, so the
// last sub-blocks can always be laid out (none may be 1 byte long).
func (s *stripper) gifBlanked() error {
	if s.gifOwed >= 514 {
		s.out = s.gifZeros(256)
		s.out[0] = 255
		s.gifOwed -= 256
		return nil
	}
	b, err := s.br.Peek(1)
	if err != nil {
		// Cut short: what was walked goes out as zeros, then the end.
		s.out = s.gifZeros(int(s.gifOwed))
		s.gifOwed = 0
		s.step = (*stripper).rest
		return nil
	}
	if b[0] != 0 {
		n, _ := s.br.Discard(1 + int(b[0]))
		s.gifOwed += int64(n)
		return nil
	}
	_, _ = s.br.Discard(1)
	out := s.gifZeros(int(s.gifOwed) + 1) // the terminator included
	for i, left := 0, int(s.gifOwed); left > 0; {
		k := min(left, 256)
		if left-k == 1 {
			k = 255
		}
		out[i] = byte(k - 1)
		i, left = i+k, left-k
	}
	s.out, s.gifOwed, s.step = out, 0, (*stripper).gifBlock
	return nil
}

// gifZeros returns n zero bytes of s.unit.
func (s *stripper) gifZeros(n int) []byte {
	if cap(s.unit) < n {
		s.unit = make([]byte, n)
	}
	z := s.unit[:n]
	clear(z)
	return z
}

// blank overwrites an XMP packet with spaces: XML readers see an empty
// document, and the length stays.
func blank(b []byte) {
	for i := range b {
		b[i] = ' '
	}
}

// MP4 (ISO base media, QuickTime): top-level boxes to the end of the file,
// moov, trak and udta opened; the boxes holding a recording location are
// made free boxes of zeros, their size kept.

// isAV says t is an audio or video type, whose bytes may be an MP4 (the
// walk checks that they are).
func isAV(t string) bool {
	return strings.HasPrefix(t, "video/") || strings.HasPrefix(t, "audio/")
}

// mp4Leading are the types an MP4 or QuickTime file starts with.
var mp4Leading = map[string]bool{"ftyp": true, "moov": true, "mdat": true, "wide": true, "free": true, "skip": true, "pnot": true}

// avStart tells an MP4 from a WebM or Matroska file (mkv.go).
func (s *stripper) avStart() error {
	b := s.peek(8)
	if b == nil {
		return nil
	}
	switch {
	case binary.BigEndian.Uint32(b) == mkvEBML:
		s.step = (*stripper).mkvElement
	case mp4Leading[string(b[4:8])]:
		s.step = (*stripper).mp4Box
	default:
		s.step = (*stripper).rest
	}
	return nil
}

// mp4XMP is the user type of the uuid box holding an MP4's XMP packet
// (a MOV keeps it in udta/XMP_).
var mp4XMP = []byte("\xBE\x7A\xCF\xCB\x97\xA9\x42\xE8\x9C\x71\x99\x94\x91\xE3\xAF\xAC")

// metaLocations are the keys of a meta that hold a location: Apple's
// (com.apple.quicktime.location.ISO6709, .accuracy.horizontal, ...) and
// ffmpeg's ("location", a key of the mdta namespace).
var metaLocations = [][]byte{[]byte("com.apple.quicktime.location"), []byte("mdtalocation")}

// mp4Box walks the next box.
func (s *stripper) mp4Box() error {
	for len(s.boxes) > 0 && s.pos >= s.boxes[len(s.boxes)-1].end {
		s.boxes = s.boxes[:len(s.boxes)-1]
	}
	end, parent := int64(math.MaxInt64), ""
	if len(s.boxes) > 0 {
		in := s.boxes[len(s.boxes)-1]
		end, parent = in.end, in.typ
		if end-s.pos < 8 { // QuickTime ends a udta with 32 zero bits
			s.through(end-s.pos, false)
			return nil
		}
	}
	h, n, hl, typ, ok := s.boxHeader()
	if !ok {
		return nil
	}
	if n == 0 { // to the end of the file, or of the box it is in
		n = end - s.pos
	}
	if n < int64(hl) || n > end-s.pos {
		// Not a box a player would read: the rest of the box it is
		// in (or of the file) goes through as it is; after a video
		// appended to a picture, what follows is a trailer again, from
		// the header's second byte on (the trailer would find this
		// box's ftyp again, and again).
		switch {
		case len(s.boxes) == 0 && s.inJPEG:
			s.emit(h, 1)
			s.step = (*stripper).jpegTrailer
		case len(s.boxes) == 0:
			s.step = (*stripper).rest
		default:
			s.through(end-s.pos, false)
		}
		return nil
	}
	xmp := typ == "XMP_" && parent == "udta"
	if typ == "uuid" && n >= int64(hl+len(mp4XMP)) {
		b := s.peek(hl + len(mp4XMP))
		if b == nil {
			return nil
		}
		h, xmp = b[:hl], bytes.Equal(b[hl:], mp4XMP)
	}
	switch {
	case xmp && n > maxUnit:
		// An XMP packet too large to hold and read goes whole.
		s.free(h, hl, n)
	case xmp:
		b, err := s.whole(int(n))
		if err != nil {
			return err
		}
		s.pos += n
		if mentionsLocation(b[hl:]) {
			copy(b[4:8], "free")
			clear(b[hl:])
		}
		s.out = b
	case typ == "moov" && parent == "", typ == "trak" && parent == "moov",
		typ == "udta" && (parent == "moov" || parent == "trak"):
		s.boxes = append(s.boxes, mp4Open{s.pos + n, typ})
		s.emit(h, hl)
		s.pos += int64(hl)
	case parent == "udta" && (typ == "\xa9xyz" || typ == "loci"),
		typ == "meta" && parent != "udta" && n > maxUnit:
		// Apple's meta (in moov or a trak) is small: one too large to
		// hold and read goes whole. A udta's (iTunes tags, cover art
		// over maxUnit) stays.
		s.free(h, hl, n)
	case typ == "meta" && n <= maxUnit:
		// Its keys name what its ilst holds; the meta goes whole when
		// they name a location. Its bytes are searched, not its
		// children walked, so MP4's (a full box: version and flags
		// before its children) and QuickTime's (none) are read alike.
		b, err := s.whole(int(n))
		if err != nil {
			return err
		}
		s.pos += n
		if slices.ContainsFunc(metaLocations, func(k []byte) bool { return bytes.Contains(b[hl:], k) }) {
			copy(b[4:8], "free")
			clear(b[hl:])
		}
		s.out = b
	default:
		s.through(n, false)
	}
	return nil
}

// through passes the next n bytes of an MP4 through, as they are or as
// zeros.
func (s *stripper) through(n int64, zero bool) {
	s.pos += n
	s.passThen(n, zero, (*stripper).mp4Box)
}

// free makes the n-byte box whose hl-byte header is h a free box of
// zeros.
func (s *stripper) free(h []byte, hl int, n int64) {
	copy(s.hdr[:], h[:hl])
	copy(s.hdr[4:8], "free")
	s.out = s.hdr[:hl]
	_, _ = s.br.Discard(hl)
	s.pos += int64(hl)
	s.through(n-int64(hl), true)
}

// boxHeader reads the ISO-BMFF box header at the stream's position: the
// header's bytes, the box's size (a 64-bit size when the 32-bit one is 1;
// 0 is left to the caller: to the end of the file or of the box it is
// in; -1 when the 64-bit size is beyond any file, a box no reader reads),
// the header's length and the box type. ok is false when more input is
// needed.
func (s *stripper) boxHeader() (h []byte, n int64, hl int, typ string, ok bool) {
	if h = s.peek(8); h == nil {
		return nil, 0, 0, "", false
	}
	n, hl, typ = int64(binary.BigEndian.Uint32(h)), 8, string(h[4:8])
	if n == 1 {
		if h = s.peek(16); h == nil {
			return nil, 0, 0, "", false
		}
		n, hl = -1, 16
		if u := binary.BigEndian.Uint64(h[8:]); u <= math.MaxInt64 {
			n = int64(u)
		}
	}
	return h, n, hl, typ, true
}
