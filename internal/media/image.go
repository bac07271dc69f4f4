package media

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	stddraw "image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"maps"
	"slices"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"

	chat "github.com/chatd/chatd"
)

// ErrBomb refuses an image whose header declares more pixels than
// allowed: decoding it could take gigabytes.
var ErrBomb = errors.New("image declares too many pixels")

// codec reads the images of one type.
type codec struct {
	decode       func(io.Reader) (image.Image, error)
	decodeConfig func(io.Reader) (image.Config, error)
}

// codecs are the image types chatd reads (and thumbnails).
var codecs = map[string]codec{
	"image/jpeg": {jpeg.Decode, jpeg.DecodeConfig},
	"image/png":  {png.Decode, png.DecodeConfig},
	"image/gif":  {gif.Decode, gif.DecodeConfig}, // decode reads the first frame
	"image/webp": {webp.Decode, webp.DecodeConfig},
}

// DecodableTypes lists the image types chatd reads (and thumbnails),
// sorted.
func DecodableTypes() []string {
	return slices.Sorted(maps.Keys(codecs))
}

// Decodable reports whether chatd reads (and thumbnails) images of type t.
func Decodable(t string) bool {
	_, ok := codecs[t]
	return ok
}

func decodeConfig(r io.Reader, t string) (image.Config, error) {
	c, ok := codecs[t]
	if !ok {
		return image.Config{}, fmt.Errorf("cannot read images of type %s", t)
	}
	return c.decodeConfig(r)
}

func decode(r io.Reader, t string) (image.Image, error) {
	c, ok := codecs[t]
	if !ok {
		return nil, fmt.Errorf("cannot read images of type %s", t)
	}
	return c.decode(r)
}

// Size is an image's size as it is shown: EXIF orientations 5 to 8 turn
// it a quarter, so width and height swap.
type Size struct {
	Width, Height int
	Orientation   int // EXIF orientation, 1 (none) to 8
}

// Config reads an image's size from its header alone (r is read only up
// to the header) and refuses one of more than maxPixels: a tiny file can
// declare 50,000 × 50,000 pixels. orientation is the EXIF orientation
// (StripLocation reports it; 0 or 1 for none).
func Config(r io.Reader, t string, maxPixels int64, orientation int) (Size, error) {
	cfg, err := decodeConfig(r, t)
	if err != nil {
		return Size{}, fmt.Errorf("read the image header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Size{}, fmt.Errorf("read the image header: no size")
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return Size{}, fmt.Errorf("%w: %d × %d px, the limit is %d megapixels", ErrBomb, cfg.Width, cfg.Height, maxPixels/1_000_000)
	}
	s := Size{Width: cfg.Width, Height: cfg.Height, Orientation: orientation}
	if orientation >= 5 && orientation <= 8 {
		s.Width, s.Height = s.Height, s.Width
	}
	return s, nil
}

// Thumbnail decodes an image (after checking its header as Config does)
// and returns a JPEG of at most chat.ThumbnailMaxSide pixels on its long
// side, turned upright by the EXIF orientation, transparency on white,
// with no metadata at all: nothing of the original's EXIF (location
// included) survives the re-encoding. An r that can seek is read again
// from where it was after the header check: what precedes the picture
// (megabytes of metadata a JPEG may carry before its frame) is never
// held, so the memory taken is what ThumbnailCost says. A JPEG of more
// than maxJPEGScans scans is refused (ErrTooCostly) as the decoder comes
// to them: its time, unlike its memory, grows with the scans.
func Thumbnail(r io.Reader, t string, maxPixels int64, orientation int) ([]byte, chat.Thumbnail, error) {
	var rest io.Reader
	if rs, ok := r.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, chat.Thumbnail{}, fmt.Errorf("read the image: %w", err)
		}
		if _, err := Config(rs, t, maxPixels, orientation); err != nil {
			return nil, chat.Thumbnail{}, err
		}
		if _, err := rs.Seek(start, io.SeekStart); err != nil {
			return nil, chat.Thumbnail{}, fmt.Errorf("read the image: %w", err)
		}
		rest = rs
	} else {
		var head bytes.Buffer
		if _, err := Config(io.TeeReader(r, &head), t, maxPixels, orientation); err != nil {
			return nil, chat.Thumbnail{}, err
		}
		rest = io.MultiReader(&head, r)
	}
	if t == "image/jpeg" {
		rest = &scanLimit{r: rest, tap: headerTap{jpeg: true, whole: true}}
	}
	src, err := decode(rest, t)
	if err != nil {
		return nil, chat.Thumbnail{}, fmt.Errorf("decode the image: %w", err)
	}
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	if long := max(w, h); long > chat.ThumbnailMaxSide {
		w, h = max(1, w*chat.ThumbnailMaxSide/long), max(1, h*chat.ThumbnailMaxSide/long)
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	stddraw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, stddraw.Src)
	// BiLinear widens its kernel with the scale: every source pixel
	// counts, so a photo of fine detail does not alias.
	draw.BiLinear.Scale(dst, dst.Bounds(), src, b, draw.Over, nil)
	up := orient(dst, orientation)
	var out bytes.Buffer
	if err := jpeg.Encode(&out, up, &jpeg.Options{Quality: 80}); err != nil {
		return nil, chat.Thumbnail{}, fmt.Errorf("encode the thumbnail: %w", err)
	}
	ub := up.Bounds()
	return out.Bytes(), chat.Thumbnail{ContentType: "image/jpeg", Width: ub.Dx(), Height: ub.Dy(), Size: int64(out.Len())}, nil
}

// orient applies an EXIF orientation (2-8) to a small image.
func orient(src *image.RGBA, o int) *image.RGBA {
	if o < 2 || o > 8 {
		return src
	}
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var dx, dy int
			switch o {
			case 2: // mirrored
				dx, dy = w-1-x, y
			case 3: // upside down
				dx, dy = w-1-x, h-1-y
			case 4:
				dx, dy = x, h-1-y
			case 5:
				dx, dy = y, x
			case 6: // turned a quarter clockwise
				dx, dy = h-1-y, x
			case 7:
				dx, dy = h-1-y, w-1-x
			case 8:
				dx, dy = y, w-1-x
			}
			dst.SetRGBA(dx, dy, src.RGBAAt(x, y))
		}
	}
	return dst
}

// ErrTooCostly says decoding and scaling an image for its thumbnail would
// take more memory than is granted, or, for a JPEG of more than
// maxJPEGScans scans, more time than any picture needs: it is shown
// without one.
var ErrTooCostly = errors.New("the image would take too much memory or time to thumbnail")

// ThumbnailCost is the memory in bytes Thumbnail takes for the image r
// starts with, read from its header alone (r is read up to it): the
// decoded pixels (up to 8 bytes a pixel for a 16-bit PNG), the decoder's
// working memory (a progressive JPEG's coefficients, 4 bytes a pixel of
// each component; a PNG's rows and interlace passes; an interlaced GIF's
// frame put in order; a lossless WebP's transform), and the scaler's
// buffers (32 bytes a pixel of a column of the thumbnail's width by the
// image's height, which a very long and thin image makes large).
func ThumbnailCost(r io.Reader, t string) (int64, error) {
	tap := &headerTap{jpeg: t == "image/jpeg"}
	cfg, err := decodeConfig(io.TeeReader(r, tap), t)
	if err != nil {
		return 0, fmt.Errorf("read the image header: %w", err)
	}
	w, h := int64(cfg.Width), int64(cfg.Height)
	if w <= 0 || h <= 0 {
		return 0, fmt.Errorf("read the image header: no size")
	}
	var decode int64
	switch t {
	case "image/jpeg":
		// The decoder takes three components for R, G and B (no
		// JFIF, an Adobe segment or the components' ids saying so,
		// before the frame header or after it) as it says.
		decode = jpegCost(tap.sof, w, h, cfg.ColorModel == color.RGBAModel)
	case "image/png":
		decode = pngCost(tap.first[:tap.n], w, h)
	case "image/gif":
		// One paletted frame, and its copy when it is interlaced (the
		// decoder puts the rows in order into a new one), which only
		// the frame's descriptor says, past the extensions.
		decode = 2 * w * h
	default: // WebP: lossless pixels and a transform's copy (lossy: less)
		decode = 8 * w * h
	}
	tw, th := w, h
	if long := max(w, h); long > chat.ThumbnailMaxSide {
		tw, th = max(1, w*chat.ThumbnailMaxSide/long), max(1, h*chat.ThumbnailMaxSide/long)
	}
	scale := 32*tw*h + 40*(w+h) + 8*tw*th // BiLinear's column buffer and weights; the thumbnail, upright
	return decode + scale + 64<<10, nil
}

// headerTap watches the bytes a header read takes, keeping none of the
// metadata it reads past (a JPEG's frame header may follow megabytes of
// it: a phone's depth map in extended XMP): a PNG's first bytes (its
// IHDR, which the read of a paletted one's header may be megabytes of
// text chunks before), and a JPEG's frame header (sof: its marker, then
// its body), found by walking the segments as Go's decoder does, not by
// searching the bytes, where a lookalike may be.
type headerTap struct {
	first [64]byte
	n     int // of first

	jpeg   bool
	whole  bool // walk on past the frame header to the end, counting scans
	scans  int  // the SOS markers walked to
	state  jpegWalk
	t0     byte // the byte before, where a marker is looked for
	marker byte
	left   int // of the segment being read past or kept
	sof    []byte
}

// jpegWalk is where the JPEG walk is: the SOI, a marker's two bytes
// (0xFF, then the marker), fill bytes, a segment's length, its body read
// past (or, a frame header's, kept), done.
type jpegWalk int

const (
	walkSOI jpegWalk = iota
	walkSOI2
	walkMarker0
	walkMarker1
	walkFill
	walkLength0
	walkLength1
	walkSkip
	walkSOF
	walkDone
)

func (t *headerTap) Write(p []byte) (int, error) {
	t.n += copy(t.first[t.n:], p)
	if t.jpeg {
		t.walk(p)
	}
	return len(p), nil
}

// walk follows the segments of a JPEG as image/jpeg's decoder does:
// extraneous bytes before a marker and "\xff\x00" ignored, fill bytes,
// restart markers without a length, every other segment's length
// skipped, to the first frame header (a second one is an error to it).
func (t *headerTap) walk(p []byte) {
	for len(p) > 0 && t.state != walkDone {
		switch t.state {
		case walkSkip:
			n := min(t.left, len(p))
			t.left -= n
			p = p[n:]
			if t.left == 0 {
				t.state = walkMarker0
			}
			continue
		case walkSOF:
			n := min(t.left, len(p))
			t.sof = append(t.sof, p[:n]...)
			t.left -= n
			p = p[n:]
			if t.left == 0 {
				t.state = walkDone
			}
			continue
		}
		b := p[0]
		p = p[1:]
		switch t.state {
		case walkSOI:
			t.state = walkSOI2
		case walkSOI2:
			t.state = walkMarker0
		case walkMarker0:
			t.t0, t.state = b, walkMarker1
		case walkMarker1:
			switch {
			case t.t0 != 0xFF:
				t.t0 = b
			case b == 0:
				t.state = walkMarker0
			case b == 0xFF:
				t.state = walkFill
			default:
				t.atMarker(b)
			}
		case walkFill:
			if b != 0xFF {
				t.atMarker(b)
			}
		case walkLength0:
			t.left, t.state = int(b)<<8, walkLength1
		case walkLength1:
			t.left += int(b) - 2
			switch {
			case t.left < 0:
				t.state = walkDone
			case t.marker >= 0xC0 && t.marker <= 0xC2 && !t.whole:
				t.sof = append(make([]byte, 0, 1+t.left), t.marker)
				t.state = walkSOF
				if t.left == 0 {
					t.state = walkDone
				}
			case t.left == 0:
				t.state = walkMarker0
			default:
				t.state = walkSkip
			}
		}
	}
}

// atMarker goes on after the marker m.
func (t *headerTap) atMarker(m byte) {
	switch {
	case m == 0xD9: // the end of the picture: no frame header
		t.state = walkDone
	case m >= 0xD0 && m <= 0xD7: // a restart marker has no length
		t.state = walkMarker0
	default:
		if m == 0xDA {
			t.scans++
		}
		t.marker, t.state = m, walkLength0
	}
}

// maxJPEGScans bounds the scans of a JPEG chatd decodes. Each scan of a
// progressive JPEG has the decoder walk every block of its component
// again, however few bytes it is (an end-of-band run covers 32767 blocks
// in 15 bits): 100 scans of 4096 × 4096 pixels, 4 KB, take Go's decoder
// seconds, and it has no limit of its own. Encoders write about 10
// (libjpeg's progression for colour pictures); libjpeg-turbo suggests
// refusing more than 500.
const maxJPEGScans = 100

// scanLimit is a JPEG read by the decoder: it follows the segments as
// the decoder does (headerTap) and fails the read that would take the
// decoder past maxJPEGScans scans.
type scanLimit struct {
	r   io.Reader
	tap headerTap
	err error
}

func (s *scanLimit) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	s.tap.walk(p[:n])
	if s.tap.scans > maxJPEGScans {
		s.err = fmt.Errorf("%w: a JPEG of more than %d scans", ErrTooCostly, maxJPEGScans)
		return 0, s.err
	}
	return n, err
}

// jpegCost is what Go's JPEG decoder allocates for a w × h picture whose
// frame header (marker, then body) is sof, or the worst case when there
// is none to read.
func jpegCost(sof []byte, w, h int64, rgb bool) int64 {
	if len(sof) < 7 || sof[6] == 0 || len(sof) < 7+3*int(sof[6]) {
		return 24 * w * h
	}
	return sofCost(sof[0], sof[1:], w, h, rgb)
}

// sofCost is what Go's JPEG decoder allocates for the picture of w × h
// pixels whose frame header (marker m) is seg, of nc ≥ 1 components all in
// seg: each component's plane (MCU-aligned), a progressive one's
// coefficients, and the RGBA or CMYK picture it converts to (rgb: its
// three components are R, G and B).
func sofCost(m byte, seg []byte, w, h int64, rgb bool) int64 {
	nc := int(seg[5])
	hmax, vmax := int64(1), int64(1)
	for c := 0; c < nc; c++ {
		hv := seg[7+3*c]
		hmax, vmax = max(hmax, int64(hv>>4)), max(vmax, int64(hv&15))
	}
	mxx, myy := (w+8*hmax-1)/(8*hmax), (h+8*vmax-1)/(8*vmax)
	var cost int64
	for c := 0; c < nc; c++ {
		hv := seg[7+3*c]
		units := int64(hv>>4) * int64(hv&15) * mxx * myy
		if nc == 1 {
			units = mxx * myy * hmax * vmax
		}
		cost += 64 * units // the plane
		if m == 0xC2 {
			cost += 256 * units // the coefficients
		}
	}
	if nc == 4 || rgb {
		cost += 4 * (8 * hmax * mxx) * (8 * vmax * myy)
	}
	return cost
}

// pngCost is what Go's PNG decoder allocates for a picture whose header
// is head: the picture (paletted: 1 byte a pixel; 16-bit: 8; else 4),
// two rows of the raw data, and an interlaced picture's largest pass.
func pngCost(head []byte, w, h int64) int64 {
	if len(head) < 29 {
		return 12 * w * h
	}
	depth, colorType, interlaced := int64(head[24]), head[25], head[28] != 0
	perPixel, channels := int64(4), int64(map[byte]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colorType])
	switch {
	case colorType == 3:
		perPixel = 1
	case depth == 16:
		perPixel = 8
	}
	cost := perPixel*w*h + 2*(1+(max(channels, 1)*depth*w+7)/8)
	if interlaced {
		cost += perPixel * w * h / 2
	}
	return cost
}
