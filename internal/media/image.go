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
// included) survives the re-encoding.
func Thumbnail(r io.Reader, t string, maxPixels int64, orientation int) ([]byte, chat.Thumbnail, error) {
	var head bytes.Buffer
	if _, err := Config(io.TeeReader(r, &head), t, maxPixels, orientation); err != nil {
		return nil, chat.Thumbnail{}, err
	}
	src, err := decode(io.MultiReader(&head, r), t)
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
