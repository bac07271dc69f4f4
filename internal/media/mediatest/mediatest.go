// Package mediatest makes the files attachment tests upload: photos with
// and without location data, a decompression bomb, a voice note, an HTML
// page. Every function is deterministic and safe for concurrent use.
package mediatest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
)

// Latitude is the GPS latitude JPEGWithLocation writes, as its EXIF
// bytes: three rationals, degrees/minutes/seconds (52° 31' 12").
var Latitude = func() []byte {
	b := make([]byte, 24)
	for i, v := range []uint32{52, 1, 31, 1, 12, 1} {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}()

func picture(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetRGBA(x, y, color.RGBA{R: uint8(x * 255 / max(1, w)), G: uint8(y * 255 / max(1, h)), B: 160, A: 255})
		}
	}
	// A dark top-left corner tells which way up a thumbnail is.
	for y := 0; y < h/4; y++ {
		for x := 0; x < w/4; x++ {
			img.SetRGBA(x, y, color.RGBA{A: 255})
		}
	}
	return img
}

// JPEG is a w×h photo without metadata.
func JPEG(w, h int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, picture(w, h), &jpeg.Options{Quality: 85}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// PNG is a w×h image.
func PNG(w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, picture(w, h)); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// exif is a little-endian TIFF block with IFD0 {Orientation, GPSInfo}
// and a GPS IFD {GPSLatitudeRef "N", GPSLatitude}.
func exif(orientation uint16) []byte {
	var t bytes.Buffer
	le := binary.LittleEndian
	w := func(v any) { _ = binary.Write(&t, le, v) }
	t.WriteString("II*\x00")
	w(uint32(8))
	// IFD0 at 8: 2 entries (2+24+4 = 30 bytes), GPS IFD at 38.
	w(uint16(2))
	w([]uint16{0x0112, 3}) // Orientation, SHORT
	w(uint32(1))
	w([]uint16{orientation, 0})
	w([]uint16{0x8825, 4}) // GPSInfo, LONG
	w(uint32(1))
	w(uint32(38))
	w(uint32(0))
	// GPS IFD at 38: 2 entries (30 bytes), latitude values at 68.
	w(uint16(2))
	w([]uint16{0x0001, 2}) // GPSLatitudeRef, ASCII
	w(uint32(2))
	t.WriteString("N\x00\x00\x00")
	w([]uint16{0x0002, 5}) // GPSLatitude, RATIONAL
	w(uint32(3))
	w(uint32(68))
	w(uint32(0))
	t.Write(Latitude)
	return t.Bytes()
}

// JPEGWithLocation is a w×h photo with EXIF orientation and a GPS
// position (Latitude), as phones write them.
func JPEGWithLocation(w, h int, orientation uint16) []byte {
	plain := JPEG(w, h)
	seg := append([]byte("Exif\x00\x00"), exif(orientation)...)
	app1 := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(app1[2:], uint16(len(seg)+2))
	out := append([]byte{}, plain[:2]...)
	out = append(out, app1...)
	out = append(out, seg...)
	return append(out, plain[2:]...)
}

// Bomb is a valid PNG of a few hundred bytes whose header declares
// 50,000 × 50,000 pixels: decoding it would take 10 GB.
func Bomb() []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, 50000)
	binary.BigEndian.PutUint32(ihdr[4:], 50000)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}) // deflate of nothing
	chunk("IEND", nil)
	return b.Bytes()
}

// ScanBomb is a valid progressive JPEG of w × h grey pixels and scans
// scans, each an end-of-band run over every block (15 bits per 32767
// blocks): a few bytes a scan, each of which has Go's decoder walk all
// the picture's coefficients again.
func ScanBomb(w, h, scans int) []byte {
	q := make([]byte, 65)
	for i := 1; i < len(q); i++ {
		q[i] = 1
	}
	out := []byte{0xFF, 0xD8}
	out = append(out, jpegSegment(0xDB, q)...)
	out = append(out, jpegSegment(0xC2, []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 1, 1, 0x11, 0})...)
	// DC table 0 and AC table 0, one code each ("0"): category 0, and
	// EOB14 (a run of 2^14 blocks plus 14 more bits).
	dht := append([]byte{0x00, 1}, make([]byte, 15)...)
	dht = append(dht, 0x00, 0x10, 1)
	dht = append(append(dht, make([]byte, 15)...), 0xE0)
	out = append(out, jpegSegment(0xC4, dht)...)
	// Each scan: EOB14 runs of 32767 blocks (0 then fourteen 1 bits,
	// the bytes stuffed), padded with 1 bits.
	var data []byte
	var acc uint64
	var n uint
	for left := ((w + 7) / 8) * ((h + 7) / 8); left > 0; left -= 32767 {
		acc, n = acc<<15|0x3FFF, n+15
		for ; n >= 8; n -= 8 {
			if b := byte(acc >> (n - 8)); b == 0xFF {
				data = append(data, 0xFF, 0)
			} else {
				data = append(data, b)
			}
		}
	}
	if n > 0 {
		if b := byte(acc<<(8-n)) | byte(0xFF>>n); b == 0xFF {
			data = append(data, 0xFF, 0)
		} else {
			data = append(data, b)
		}
	}
	for i := 0; i < scans; i++ {
		// Component 1, coefficients 1 to 63, a refinement (Ah 1, Al 0).
		out = append(out, jpegSegment(0xDA, []byte{1, 1, 0x00, 1, 63, 0x10})...)
		out = append(out, data...)
	}
	return append(out, 0xFF, 0xD9)
}

// InterlacedGIF is a GIF of w × h pixels whose one frame is interlaced
// (its rows stored 1st, 9th, 17th, ..., then 5th, 13th, ...), as
// GIF encoders may write them for a picture shown as it arrives.
func InterlacedGIF(w, h int) []byte {
	m := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.White, color.Black})
	for i := range m.Pix {
		m.Pix[i] = uint8(i % 3 / 2)
	}
	var b bytes.Buffer
	if err := gif.Encode(&b, m, nil); err != nil {
		panic(err)
	}
	f := b.Bytes()
	// The image descriptor, after the header, the global colour table
	// and any extension: set its interlace flag. The rows keep the
	// order Encode wrote: the picture is another one, as big.
	i := 13
	if f[10]&0x80 != 0 {
		i += 3 << (f[10]&7 + 1)
	}
	for f[i] == 0x21 {
		for i += 2; f[i] != 0; i += int(f[i]) + 1 {
		}
		i++
	}
	f[i+9] |= 0x40
	return f
}

// HTML is a web page, as someone would declare as image/png.
func HTML() []byte {
	return []byte("<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>\n")
}

// WAV is ms milliseconds of 8 kHz 16-bit mono silence: a voice note.
func WAV(ms int) []byte {
	const rate = 8000
	n := rate * 2 * ms / 1000
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString("RIFF")
	_ = binary.Write(&b, le, uint32(36+n))
	b.WriteString("WAVEfmt ")
	_ = binary.Write(&b, le, []uint32{16})
	_ = binary.Write(&b, le, []uint16{1, 1})
	_ = binary.Write(&b, le, []uint32{rate, rate * 2})
	_ = binary.Write(&b, le, []uint16{2, 16})
	b.WriteString("data")
	_ = binary.Write(&b, le, uint32(n))
	b.Write(make([]byte, n))
	return b.Bytes()
}

// PDF is a tiny PDF document.
func PDF() []byte {
	return []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
}

// XMPLatitude is the GPS latitude the XMP packets of this package carry.
var XMPLatitude = []byte(`exif:GPSLatitude="52,31.2N"`)

// xmp is an XMP packet with a GPS position (XMPLatitude).
func xmp() []byte {
	return []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
		`<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" ` + string(XMPLatitude) + `/></rdf:RDF></x:xmpmeta>`)
}

// jpegSegment is a JPEG marker segment holding body.
func jpegSegment(marker byte, body []byte) []byte {
	s := []byte{0xFF, marker, 0, 0}
	binary.BigEndian.PutUint16(s[2:], uint16(len(body)+2))
	return append(s, body...)
}

// JPEGWithLocationAfter is JPEGWithLocation with pad bytes of other
// application segments (ICC profile parts, as cameras and editors write
// them, 64 KiB each) before its EXIF and XMP, and a second picture
// appended after its end (a Multi-Picture Format preview, as phones
// append them) carrying a location of its own.
func JPEGWithLocationAfter(w, h int, orientation uint16, pad int) []byte {
	plain := JPEG(w, h)
	out := append([]byte{}, plain[:2]...)
	for pad > 0 {
		n := min(pad, 65000)
		out = append(out, jpegSegment(0xE2, append([]byte("ICC_PROFILE\x00"), make([]byte, n)...))...)
		pad -= n
	}
	out = append(out, jpegSegment(0xE1, append([]byte("Exif\x00\x00"), exif(orientation)...))...)
	out = append(out, jpegSegment(0xE1, append([]byte("http://ns.adobe.com/xap/1.0/\x00"), xmp()...))...)
	out = append(out, plain[2:]...)
	return append(out, JPEGWithLocation(64, 48, 1)...)
}

// noise is a w×h picture of pseudo-random pixels: it does not compress.
func noise(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	x := uint32(1)
	for i := range img.Pix {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		img.Pix[i] = byte(x)
	}
	return img
}

func pngChunk(typ string, data []byte) []byte {
	c := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	c = append(c, typ...)
	c = append(c, data...)
	return binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
}

// PNGWithLocationAfterIDAT is a w×h PNG of noise (about 4 bytes a pixel)
// whose EXIF (eXIf, with a GPS position and orientation) and XMP (iTXt,
// with a GPS position) come after the image data, where ExifTool and
// others add them.
func PNGWithLocationAfterIDAT(w, h int, orientation uint16) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, noise(w, h)); err != nil {
		panic(err)
	}
	p := b.Bytes()
	iend := p[len(p)-12:]
	out := append([]byte{}, p[:len(p)-12]...)
	out = append(out, pngChunk("eXIf", exif(orientation))...)
	out = append(out, pngChunk("iTXt", append([]byte("XML:com.adobe.xmp\x00\x00\x00\x00\x00"), xmp()...))...)
	return append(out, iend...)
}

// WebPWithLocation is a lossless WebP of w×h pixels in the extended
// format, its EXIF (GPS position and orientation) and XMP (GPS position)
// after the image data as the WebP container specifies; the image data
// is a valid header followed by pad bytes (it is not decodable).
func WebPWithLocation(w, h int, orientation uint16, pad int) []byte {
	chunk := func(typ string, data []byte) []byte {
		c := append([]byte(typ), binary.LittleEndian.AppendUint32(nil, uint32(len(data)))...)
		c = append(c, data...)
		if len(data)%2 == 1 {
			c = append(c, 0)
		}
		return c
	}
	vp8x := make([]byte, 10)
	vp8x[0] = 0x08 | 0x04 // EXIF and XMP present
	put24 := func(b []byte, v int) { b[0], b[1], b[2] = byte(v), byte(v>>8), byte(v>>16) }
	put24(vp8x[4:], w-1)
	put24(vp8x[7:], h-1)
	vp8l := make([]byte, 5+pad)
	vp8l[0] = 0x2F
	binary.LittleEndian.PutUint32(vp8l[1:], uint32(w-1)|uint32(h-1)<<14)
	var body []byte
	body = append(body, "WEBP"...)
	body = append(body, chunk("VP8X", vp8x)...)
	body = append(body, chunk("VP8L", vp8l)...)
	body = append(body, chunk("EXIF", exif(orientation))...)
	body = append(body, chunk("XMP ", xmp())...)
	return append(append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...), body...)
}

// PNG16 is a w×h PNG of 16 bits a channel (Go decodes it to 8 bytes a
// pixel).
func PNG16(w, h int) []byte {
	src := picture(w, h)
	img := image.NewNRGBA64(src.Rect)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, src.At(x, y))
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// VideoLocation is the ISO 6709 position MP4WithLocation records (in
// udta/©xyz, a track's udta/©xyz and Apple's meta), and LociName the
// place name of its 3GPP loci box.
var (
	VideoLocation = []byte("+48.8584+002.2945+035.000/")
	LociName      = []byte("Tour Eiffel")
)

// mp4Box is an MP4 box of type typ holding the bodies; a largesize
// header (size 1, then 64 bits) when large.
func mp4Box(typ string, large bool, body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	if large {
		h := make([]byte, 16)
		binary.BigEndian.PutUint32(h, 1)
		copy(h[4:], typ)
		binary.BigEndian.PutUint64(h[8:], uint64(16+len(b)))
		return append(h, b...)
	}
	h := make([]byte, 8)
	binary.BigEndian.PutUint32(h, uint32(8+len(b)))
	copy(h[4:], typ)
	return append(h, b...)
}

// MP4WithLocation is a video as phones record it, location and all: ftyp
// ("qt  " when qt, a MOV, whose meta has no version and flags; "isom"
// otherwise), moov (mvhd of 2.5 s; a trak whose udta holds ©xyz; udta
// with ©xyz, 3GPP loci and an encoder name; Apple's meta, whose keys name
// com.apple.quicktime.location.ISO6709 and whose ilst holds the position,
// padded by metaPad bytes of a further item) before or after (moovFirst)
// an mdat of mdatLen bytes (a largesize header when large), and, after
// everything, a top-level free box. A track's chunk offset (stco) points
// into the mdat.
func MP4WithLocation(qt, moovFirst, large bool, mdatLen, metaPad int) []byte {
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	brand := "isom"
	if qt {
		brand = "qt  "
	}
	ftyp := mp4Box("ftyp", false, []byte(brand), u32(0x200), []byte(brand+"mp41"))
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], 1000)
	binary.BigEndian.PutUint32(mvhd[16:], 2500)
	xyz := func() []byte { // QuickTime text: length, language, text
		return mp4Box("\xa9xyz", false, binary.BigEndian.AppendUint16(nil, uint16(len(VideoLocation))), []byte{0x15, 0xc7}, VideoLocation)
	}
	loci := mp4Box("loci", false, u32(0), []byte{0x15, 0xc7}, LociName, []byte{0, 0},
		u32(0x0002_4B5C), u32(0x0030_DBAB), u32(0x0023_0000), []byte("earth\x00\x00"))
	key := func(name string) []byte { return mp4Box("mdta", false, []byte(name))[4:] }
	keys := mp4Box("keys", false, u32(0), u32(3),
		u32(uint32(4+len(key("com.apple.quicktime.location.ISO6709")))), key("com.apple.quicktime.location.ISO6709"),
		u32(uint32(4+len(key("com.apple.quicktime.make")))), key("com.apple.quicktime.make"),
		u32(uint32(4+len(key("com.apple.quicktime.pad")))), key("com.apple.quicktime.pad"))
	data := func(v []byte) []byte { return mp4Box("data", false, u32(1), u32(0), v) }
	ilst := mp4Box("ilst", false,
		mp4Box("\x00\x00\x00\x01", false, data(VideoLocation)),
		mp4Box("\x00\x00\x00\x02", false, data([]byte("Apple"))),
		mp4Box("\x00\x00\x00\x03", false, data(make([]byte, metaPad))))
	hdlr := mp4Box("hdlr", false, make([]byte, 8), []byte("mdta"), make([]byte, 13))
	var meta []byte
	if qt {
		meta = mp4Box("meta", false, hdlr, keys, ilst)
	} else {
		meta = mp4Box("meta", false, u32(0), hdlr, keys, ilst)
	}
	mdatHead := 8
	if large {
		mdatHead = 16
	}
	trak := func(chunk uint32) []byte {
		stco := mp4Box("stco", false, u32(0), u32(1), u32(chunk))
		return mp4Box("trak", false,
			mp4Box("tkhd", false, make([]byte, 84)),
			mp4Box("mdia", false, mp4Box("minf", false, mp4Box("stbl", false, stco))),
			mp4Box("udta", false, xyz()))
	}
	moov := func(chunk uint32) []byte {
		return mp4Box("moov", false, mp4Box("mvhd", false, mvhd), trak(chunk),
			mp4Box("udta", false, xyz(), loci, mp4Box("\xa9too", false, []byte("chatd test"))), meta)
	}
	mdatBody := make([]byte, mdatLen)
	for i := range mdatBody {
		mdatBody[i] = byte(i*7 + i>>8)
	}
	var f []byte
	if moovFirst {
		m := moov(0)
		f = append(append(ftyp, moov(uint32(len(ftyp)+len(m)+mdatHead))...), mp4Box("mdat", large, mdatBody)...)
	} else {
		f = append(append(ftyp, mp4Box("mdat", large, mdatBody)...), moov(uint32(len(ftyp)+mdatHead))...)
	}
	return append(f, mp4Box("free", false, make([]byte, 8))...)
}

// PlaceName is the city JPEGWithPlaceNames names, and Caption the caption
// it keeps.
var (
	PlaceName = []byte("Lisboa")
	Caption   = []byte("Tram 28 at dusk")
)

// JPEGWithPlaceNames is a w×h JPEG without coordinates that still says
// where it was taken, as photo editors and catalogues write it: an XMP
// packet with photoshop:City and Iptc4xmpCore:Location, and an APP13
// IPTC-IIM block with City, Province/State and Country (2:90, 2:95,
// 2:101) beside a caption (2:120).
func JPEGWithPlaceNames(w, h int) []byte {
	x := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
		`<rdf:Description xmlns:photoshop="http://ns.adobe.com/photoshop/1.0/" xmlns:Iptc4xmpCore="http://iptc.org/std/Iptc4xmpCore/1.0/xmlns/" ` +
		`photoshop:City="` + string(PlaceName) + `" Iptc4xmpCore:Location="Alfama"/></rdf:RDF></x:xmpmeta>`)
	var iim []byte
	for _, d := range []struct {
		dataset byte
		value   []byte
	}{{90, PlaceName}, {95, []byte("Lisboa District")}, {101, []byte("Portugal")}, {120, Caption}} {
		iim = append(iim, 0x1C, 2, d.dataset, 0, 0)
		binary.BigEndian.PutUint16(iim[len(iim)-2:], uint16(len(d.value)))
		iim = append(iim, d.value...)
	}
	res := append([]byte("8BIM\x04\x04\x00\x00"), 0, 0, 0, 0) // resource 0x0404, empty name
	binary.BigEndian.PutUint32(res[8:], uint32(len(iim)))
	res = append(res, iim...)
	if len(iim)%2 == 1 {
		res = append(res, 0)
	}
	plain := JPEG(w, h)
	out := append([]byte{}, plain[:2]...)
	out = append(out, jpegSegment(0xE1, append([]byte("http://ns.adobe.com/xap/1.0/\x00"), x...))...)
	out = append(out, jpegSegment(0xED, append([]byte("Photoshop 3.0\x00"), res...))...)
	return append(out, plain[2:]...)
}

// HEIFLayout says where HEIFWithLocation puts its metadata items.
type HEIFLayout struct {
	Brand      string // the ftyp's major brand: "heic" (the default), "avif", "mif1"
	Pad        int    // bytes of coded image data in mdat
	ExifFirst  bool   // the Exif item before the image data in mdat, not after it
	ExifInIdat bool   // the Exif item in the meta's idat (construction method 1)
	SplitExif  bool   // the Exif item in two extents, the image data between them
	// SplitBackwards puts the second of the two extents before the
	// first in mdat (iloc lists them in the item's order).
	SplitBackwards bool
	MdatFirst      bool // mdat before the meta that describes it
	// Width and Height, when set, give the coded image an image spatial
	// extent (ispe) in the meta's iprp, associated by ipma after a
	// 160×120 thumbnail item's, and with them Crop (a clean aperture,
	// clap, of Crop[0]×Crop[1], when set) and Rotation (irot, in
	// quarters anticlockwise, when set), in that order.
	Width, Height int
	Crop          [2]int
	Rotation      int
	// WideIndices writes ipma's property indices in 16 bits (flags 1),
	// as files with over 127 properties do.
	WideIndices bool
	// As is the metadata as it is in the file: HEIFLocated, or as chatd
	// should store it.
	As HEIFMetadata
}

// HEIFMetadata is what HEIFWithLocation's metadata items hold.
type HEIFMetadata int

const (
	HEIFLocated    HEIFMetadata = iota // the Exif item's GPS directory, the XMP packet's GPS position
	HEIFStripped                       // the GPS directory emptied and zeroed (54 bytes), the XMP item spaces
	HEIFExifZeroed                     // the Exif item all zeros, the XMP item spaces
)

// HEIFWithLocation is a still image in the HEIF container (HEIC as
// iPhones write it, or AVIF, by l.Brand): ftyp, meta (hdlr pict, pitm,
// iinf naming a coded image, an Exif item with orientation and a GPS
// position, and an XMP item, a mime item of application/rdf+xml with a
// GPS position; iloc locating them by file offsets, from a base offset at
// the start of mdat's data; idat when l.ExifInIdat) and mdat. The coded
// image data is l.Pad bytes of a pattern, not decodable.
func HEIFWithLocation(l HEIFLayout, orientation uint16) []byte {
	brand := l.Brand
	if brand == "" {
		brand = "heic"
	}
	u16 := func(v int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
	u32 := func(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	ftyp := mp4Box("ftyp", false, []byte(brand), u32(0), []byte("mif1"+brand+"miaf"))
	exifItem := append(append(u32(6), "Exif\x00\x00"...), exif(orientation)...)
	xmpItem := xmp()
	switch l.As {
	case HEIFStripped:
		clear(exifItem[4+6+38:]) // exif's GPS directory and its values, to its end
	case HEIFExifZeroed:
		clear(exifItem)
	}
	if l.As != HEIFLocated {
		xmpItem = bytes.Repeat([]byte(" "), len(xmpItem))
	}
	image := make([]byte, l.Pad)
	for i := range image {
		image[i] = byte(i*13 + i>>9)
	}
	// mdat's data: the parts in order; extents are offsets into it.
	type ext struct{ off, n int }
	var data []byte
	put := func(b []byte) ext { e := ext{len(data), len(b)}; data = append(data, b...); return e }
	var imageExt, xmpExt ext
	var exifExts []ext
	half := len(exifItem) / 2
	switch {
	case l.ExifInIdat:
		imageExt = put(image)
	case l.ExifFirst:
		exifExts = append(exifExts, put(exifItem))
		imageExt = put(image)
	case l.SplitExif && l.SplitBackwards:
		second := put(exifItem[half:])
		imageExt = put(image)
		exifExts = append(exifExts, put(exifItem[:half]), second)
	case l.SplitExif:
		exifExts = append(exifExts, put(exifItem[:half]))
		imageExt = put(image)
		exifExts = append(exifExts, put(exifItem[half:]))
	default:
		imageExt = put(image)
		exifExts = append(exifExts, put(exifItem))
	}
	xmpExt = put(xmpItem)

	infe := func(id int, typ string, rest ...[]byte) []byte {
		return mp4Box("infe", false, append([][]byte{u32(2 << 24), u16(id), u16(0), []byte(typ), []byte("\x00")}, rest...)...)
	}
	iinf := mp4Box("iinf", false, u32(0), u16(3),
		infe(1, "hvc1"), infe(2, "Exif"), infe(3, "mime", []byte("application/rdf+xml\x00")))
	var iprp []byte
	if l.Width > 0 {
		iinf = mp4Box("iinf", false, u32(0), u16(4),
			infe(1, "hvc1"), infe(2, "Exif"), infe(3, "mime", []byte("application/rdf+xml\x00")), infe(4, "hvc1"))
		ispe := func(w, h int) []byte { return mp4Box("ispe", false, u32(0), u32(w), u32(h)) }
		props := [][]byte{mp4Box("hvcC", false, make([]byte, 23)), ispe(160, 120), ispe(l.Width, l.Height)}
		primary := []int{1 | 0x80, 3} // the decoder configuration is essential
		if l.Crop[0] > 0 {
			props = append(props, mp4Box("clap", false, u32(l.Crop[0]), u32(1), u32(l.Crop[1]), u32(1), u32(0), u32(1), u32(0), u32(1)))
			primary = append(primary, len(props))
		}
		if l.Rotation != 0 {
			props = append(props, mp4Box("irot", false, []byte{byte(l.Rotation)}))
			primary = append(primary, len(props)|0x80)
		}
		index := func(p int) []byte {
			if l.WideIndices {
				return u16(p&0x7F | p&0x80<<8)
			}
			return []byte{byte(p)}
		}
		assoc := func(id int, ps ...int) []byte {
			b := append(u16(id), byte(len(ps)))
			for _, p := range ps {
				b = append(b, index(p)...)
			}
			return b
		}
		flags := 0
		if l.WideIndices {
			flags = 1
		}
		iprp = mp4Box("iprp", false, mp4Box("ipco", false, props...),
			mp4Box("ipma", false, u32(flags), u32(2), assoc(4, 1|0x80, 2), assoc(1, primary...)))
	}
	meta := func(base int) []byte {
		// iloc version 1: 4-byte offsets, lengths and base offsets.
		item := func(id, method, baseOff int, exts ...ext) []byte {
			b := append(append(append(u16(id), u16(method)...), u16(0)...), u32(baseOff)...)
			b = append(b, u16(len(exts))...)
			for _, e := range exts {
				b = append(append(b, u32(e.off)...), u32(e.n)...)
			}
			return b
		}
		exifLoc := item(2, 0, base, exifExts...)
		var idat []byte
		if l.ExifInIdat {
			exifLoc = item(2, 1, 0, ext{0, len(exifItem)})
			idat = mp4Box("idat", false, exifItem)
		}
		iloc := mp4Box("iloc", false, u32(1<<24), []byte{0x44, 0x40}, u16(3),
			item(1, 0, base, imageExt), exifLoc, item(3, 0, base, xmpExt))
		hdlr := mp4Box("hdlr", false, u32(0), u32(0), []byte("pict"), make([]byte, 12), []byte("\x00"))
		pitm := mp4Box("pitm", false, u32(0), u16(1))
		return mp4Box("meta", false, u32(0), hdlr, pitm, iinf, iprp, iloc, idat)
	}
	mdat := mp4Box("mdat", false, data)
	if l.MdatFirst {
		return append(append(ftyp, mdat...), meta(len(ftyp)+8)...)
	}
	m := meta(0)
	return append(append(ftyp, meta(len(ftyp)+len(m)+8)...), mdat...)
}

// WebMLayout says how WebMWithLocation lays out its file.
type WebMLayout struct {
	TagsFirst      bool // Tags before the Cluster (as mkvmerge writes it), not after it (ffmpeg)
	CRC            bool // Tags and each Tag start with a CRC-32 element
	UnknownSegment bool // the Segment's size unknown (all ones): to the end of the file
	UnknownCluster bool // the Cluster's size unknown, as MediaRecorder writes it: it ends where the Tags start
	UnknownTags    bool // the Tags' size unknown (no CRC-32 of its own): ffmpeg reads its Tags all the same
	UnknownTag     bool // with UnknownTags, each Tag's and SimpleTag's size unknown too (no CRC-32s)
	Pad            int  // bytes of the Cluster's one SimpleBlock
	// Tiny, when set, puts that many bytes of tiny elements, as a
	// hostile file would, before the Cluster's SimpleBlock: empty
	// SimpleBlocks, BlockGroups of unknown size, empty Tags, Tags of
	// unknown size holding an empty Tag and a SimpleTag of unknown size
	// with an empty name and value.
	Tiny int
	// CoverPad, when set, adds a Tag whose SimpleTag COVER holds that
	// many bytes of TagBinary.
	CoverPad int
	// Stripped makes the file as chatd should store it: the SimpleTags
	// naming a location Void elements of their size (the Tag holding
	// only one of them too), every other byte as it was, the CRC-32s
	// computed again; the whole Tags a Void when it is over 256 KiB.
	// With UnknownTag, a SimpleTag naming a location keeps its name, its
	// value a Void.
	Stripped bool
}

// ebml is an EBML element: id (its bytes as written, marker bits
// included), the shortest size that holds the data, the data.
func ebml(id uint32, data ...[]byte) []byte {
	d := bytes.Join(data, nil)
	idb := binary.BigEndian.AppendUint32(nil, id)
	for len(idb) > 1 && idb[0] == 0 {
		idb = idb[1:]
	}
	return append(append(idb, ebmlSize(len(d))...), d...)
}

// ebmlUnknown is an EBML element of unknown size (8 bytes of ones): id,
// the data; it ends where an element that is not its child starts.
func ebmlUnknown(id uint32, data ...[]byte) []byte {
	h := bytes.TrimLeft(binary.BigEndian.AppendUint32(nil, id), "\x00")
	h = append(h, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	return append(h, bytes.Join(data, nil)...)
}

func ebmlSize(n int) []byte {
	l := 1
	for uint64(n) >= 1<<(7*l)-1 {
		l++
	}
	return ebmlSizeN(n, l)
}

// ebmlSizeN is n as an l-byte size field.
func ebmlSizeN(n, l int) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n)|1<<(7*l))[8-l:]
}

// ebmlVoid is a Void element (0xEC) of n bytes, header included: the
// shortest size field that makes it n, zeros.
func ebmlVoid(n int) []byte {
	l := 1
	for n-1-l >= 1<<(7*l)-1 {
		l++
	}
	return append(append([]byte{0xEC}, ebmlSizeN(n-1-l, l)...), make([]byte, n-1-l)...)
}

// WebMWithLocation is a WebM video as ffmpeg writes one remuxed from a
// phone's MP4: EBML header (DocType webm), a Segment holding Info
// (TimecodeScale 1 ms, Duration 2,500 ms), Tracks, a Cluster and Tags: a
// Tag for the whole file with ENCODER, LOCATION and LOCATION-ENG (the
// VideoLocation) and a COMMENT holding a nested GPS SimpleTag; a Tag for
// the track with its DURATION; a Tag with only
// COM.APPLE.QUICKTIME.LOCATION.ISO6709; and, with CoverPad, a Tag with a
// COVER.
func WebMWithLocation(l WebMLayout) []byte {
	str := func(id uint32, s string) []byte { return ebml(id, []byte(s)) }
	u := func(id uint32, v byte) []byte { return ebml(id, []byte{v}) }
	master := ebml
	if l.UnknownTag {
		master = ebmlUnknown
	}
	simple := func(name string, value []byte, nested ...[]byte) []byte {
		return master(0x67C8, append([][]byte{str(0x45A3, name), ebml(0x4487, value)}, nested...)...)
	}
	void := func(b []byte) []byte {
		if l.Stripped {
			return ebmlVoid(len(b))
		}
		return b
	}
	located := func(name string) []byte { // a SimpleTag naming a location
		if l.UnknownTag {
			return master(0x67C8, str(0x45A3, name), void(ebml(0x4487, VideoLocation)))
		}
		return void(simple(name, VideoLocation))
	}
	locatedTag := void
	if l.UnknownTag {
		locatedTag = func(b []byte) []byte { return b }
	}
	withCRC := func(id uint32, children ...[]byte) []byte {
		d := bytes.Join(children, nil)
		if id == 0x7373 && l.UnknownTag {
			return ebmlUnknown(id, d)
		}
		if l.CRC {
			d = append(ebml(0xBF, binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(d))), d...)
		}
		return ebml(id, d)
	}
	targets := func(track byte) []byte {
		if track == 0 {
			return ebml(0x63C0, u(0x68CA, 50))
		}
		return ebml(0x63C0, u(0x63C5, track))
	}
	tags := [][]byte{
		withCRC(0x7373, targets(0),
			simple("ENCODER", []byte("Lavf61.7.100")),
			located("LOCATION"),
			located("location-eng"),
			simple("COMMENT", []byte("a day out"), located("GPS"))),
		withCRC(0x7373, targets(1), simple("DURATION", []byte("00:00:02.500000000"))),
		locatedTag(withCRC(0x7373, targets(0), located("COM.APPLE.QUICKTIME.LOCATION.ISO6709"))),
	}
	if l.CoverPad > 0 {
		cover := make([]byte, l.CoverPad)
		for i := range cover {
			cover[i] = byte(i*11 + i>>8)
		}
		tags = append(tags, withCRC(0x7373, targets(0), ebml(0x67C8, str(0x45A3, "COVER"), ebml(0x4485, cover))))
	}
	tagsEl := withCRC(0x1254C367, tags...)
	if l.UnknownTags {
		tagsEl = ebmlUnknown(0x1254C367, tags...)
	}
	if l.Stripped && len(tagsEl) > 256<<10 {
		tagsEl = ebmlVoid(len(tagsEl))
	}
	header := ebml(0x1A45DFA3, u(0x4286, 1), u(0x42F7, 1), u(0x42F2, 4), u(0x42F3, 8), str(0x4282, "webm"),
		u(0x4287, 4), u(0x4285, 2))
	info := ebml(0x1549A966, ebml(0x2AD7B1, []byte{0x0F, 0x42, 0x40}),
		ebml(0x4489, binary.BigEndian.AppendUint64(nil, math.Float64bits(2500))),
		str(0x4D80, "Lavf61.7.100"), str(0x5741, "Lavf61.7.100"))
	tracks := ebml(0x1654AE6B, ebml(0xAE, u(0xD7, 1), u(0x73C5, 1), u(0x83, 1), str(0x86, "V_VP9"),
		ebml(0xE0, ebml(0xB0, []byte{0x02, 0x80}), ebml(0xBA, []byte{0x01, 0xE0}))))
	block := make([]byte, 4+l.Pad)
	block[0], block[3] = 0x81, 0x80 // track 1, timecode 0, keyframe
	for i := 4; i < len(block); i++ {
		block[i] = byte(i*7 + i>>9)
	}
	tiny := []byte{0xA3, 0x80, 0xA0, 0xFF, 0x12, 0x54, 0xC3, 0x67, 0x80, 0x12, 0x54, 0xC3, 0x67, 0xFF, 0x73, 0x73, 0x80,
		0x67, 0xC8, 0xFF, 0x45, 0xA3, 0x80, 0x44, 0x87, 0x80}
	tiny = bytes.Repeat(tiny, l.Tiny/len(tiny))
	cluster := ebml(0x1F43B675, u(0xE7, 0), tiny, ebml(0xA3, block))
	if l.UnknownCluster {
		cluster = ebmlUnknown(0x1F43B675, u(0xE7, 0), tiny, ebml(0xA3, block))
	}
	children := [][]byte{info, tracks, cluster, tagsEl}
	if l.TagsFirst {
		children = [][]byte{info, tracks, tagsEl, cluster}
	}
	seg := ebml(0x18538067, children...)
	if l.UnknownSegment {
		seg = ebmlUnknown(0x18538067, children...)
	}
	return append(header, seg...)
}

// GIFWithLocation is an animated GIF of w × h pixels (two frames, looping)
// carrying an XMP packet with a GPS position (XMPLatitude), padded with
// pad spaces, as exiftool and Adobe's tools write it: an application
// extension "XMP DataXMP" holding the raw packet and the 258-byte magic
// trailer that makes it read as data sub-blocks, after the frames.
func GIFWithLocation(w, h, pad int) []byte {
	pal := color.Palette{color.White, color.Black, color.RGBA{0xC0, 0x20, 0x20, 0xFF}}
	var frames []*image.Paletted
	for f := 0; f < 2; f++ {
		m := image.NewPaletted(image.Rect(0, 0, w, h), pal)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				m.SetColorIndex(x, y, uint8((x+y+f)%3))
			}
		}
		frames = append(frames, m)
	}
	var b bytes.Buffer
	if err := gif.EncodeAll(&b, &gif.GIF{Image: frames, Delay: []int{10, 10}, LoopCount: 0}); err != nil {
		panic(err)
	}
	file := b.Bytes()
	ext := []byte("\x21\xFF\x0BXMP DataXMP")
	ext = append(ext, xmp()...)
	ext = append(ext, bytes.Repeat([]byte(" "), pad)...)
	ext = append(ext, 0x01)
	for v := 0xFF; v >= 0; v-- {
		ext = append(ext, byte(v))
	}
	ext = append(ext, 0x00)
	// Before the trailer (0x3B), the file's last byte.
	return append(append(file[:len(file)-1:len(file)-1], ext...), 0x3B)
}

// hiddenEXIF is a little-endian TIFF block with five GPS directories,
// each holding GPSLatitudeRef "N" and GPSLatitude (Latitude), reached as
// readers reach them: two GPSInfo pointers in IFD0, one in IFD1 (IFD0's
// next), one in the Exif IFD and one in a SubIFD.
func hiddenEXIF() []byte {
	le := binary.LittleEndian
	type entry struct {
		tag, typ   uint16
		count, val uint32
	}
	const ifd0, ifd1, exifIFD, subIFD, gps = 8, 8 + 66, 8 + 66 + 18, 8 + 66 + 36, 8 + 66 + 54
	const values = gps + 5*30
	dir := func(next uint32, es ...entry) []byte {
		b := le.AppendUint16(nil, uint16(len(es)))
		for _, e := range es {
			b = le.AppendUint16(b, e.tag)
			b = le.AppendUint16(b, e.typ)
			b = le.AppendUint32(b, e.count)
			b = le.AppendUint32(b, e.val)
		}
		return le.AppendUint32(b, next)
	}
	ptr := func(tag uint16, off int) entry { return entry{tag, 4, 1, uint32(off)} }
	t := append([]byte("II*\x00"), le.AppendUint32(nil, ifd0)...)
	t = append(t, dir(ifd1, entry{0x0112, 3, 1, 1}, ptr(0x8825, gps), ptr(0x8825, gps+30), ptr(0x8769, exifIFD), ptr(0x014A, subIFD))...)
	t = append(t, dir(0, ptr(0x8825, gps+60))...)
	t = append(t, dir(0, ptr(0x8825, gps+90))...)
	t = append(t, dir(0, ptr(0x8825, gps+120))...)
	for i := range 5 {
		t = append(t, dir(0, entry{0x0001, 2, 2, 'N'}, entry{0x0002, 5, 3, uint32(values + 24*i)})...)
	}
	if len(t) != values {
		panic("hiddenEXIF: directories misplaced")
	}
	for range 5 {
		t = append(t, Latitude...)
	}
	return t
}

// JPEGWithHiddenLocation is a w×h photo whose location is where a
// stripper looking only at the usual places misses it, as readers still
// find it: GPS directories reached through a second GPSInfo pointer,
// IFD1, the Exif IFD and a SubIFD (Latitude); an extended XMP packet
// (XMPLatitude) whose parts come out of order, the one holding the
// position first; and a video appended after the picture (a motion
// photo's MP4, from MP4WithLocation: VideoLocation, LociName).
func JPEGWithHiddenLocation(w, h int) []byte {
	plain := JPEG(w, h)
	packet := xmp()
	cut := bytes.Index(packet, []byte(`"52,31.2N"`))
	const guid = "0123456789ABCDEF0123456789ABCDEF"
	extended := func(off int, part []byte) []byte {
		b := append([]byte("http://ns.adobe.com/xmp/extension/\x00"), guid...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(packet)))
		b = binary.BigEndian.AppendUint32(b, uint32(off))
		return jpegSegment(0xE1, append(b, part...))
	}
	out := append([]byte{}, plain[:2]...)
	out = append(out, jpegSegment(0xE1, append([]byte("Exif\x00\x00"), hiddenEXIF()...))...)
	out = append(out, jpegSegment(0xE1, []byte("http://ns.adobe.com/xap/1.0/\x00"+
		`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description xmpNote:HasExtendedXMP="`+guid+`"/></rdf:RDF></x:xmpmeta>`))...)
	out = append(out, extended(cut, packet[cut:])...)
	out = append(out, extended(0, packet[:cut])...)
	out = append(out, plain[2:]...)
	return append(out, MP4WithLocation(false, true, false, 20<<10, 0)...)
}

// MP4WithXMP is a video of 2.5 s whose XMP packet, with a GPS position
// (XMPLatitude), is where editors and ExifTool write it: a uuid box after
// moov (an MP4), or moov/udta/XMP_ (qt, a MOV).
func MP4WithXMP(qt bool) []byte {
	mvhd := make([]byte, 100)
	binary.BigEndian.PutUint32(mvhd[12:], 1000)
	binary.BigEndian.PutUint32(mvhd[16:], 2500)
	if qt {
		return bytes.Join([][]byte{
			mp4Box("ftyp", false, []byte("qt  \x00\x00\x02\x00qt  ")),
			mp4Box("moov", false, mp4Box("mvhd", false, mvhd), mp4Box("udta", false, mp4Box("XMP_", false, xmp()))),
			mp4Box("mdat", false, make([]byte, 4<<10)),
		}, nil)
	}
	uuid := []byte("\xBE\x7A\xCF\xCB\x97\xA9\x42\xE8\x9C\x71\x99\x94\x91\xE3\xAF\xAC")
	return bytes.Join([][]byte{
		mp4Box("ftyp", false, []byte("isom\x00\x00\x02\x00isommp41")),
		mp4Box("moov", false, mp4Box("mvhd", false, mvhd)),
		mp4Box("uuid", false, uuid, xmp()),
		mp4Box("mdat", false, make([]byte, 4<<10)),
	}, nil)
}
