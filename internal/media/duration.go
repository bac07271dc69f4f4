package media

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/bits"

	chat "github.com/chatd/chatd"
)

// Duration reads the length of an audio or video file in milliseconds
// from its container: WAV (header), MP4/M4A/MOV (moov/mvhd, wherever it
// is), Ogg (Opus or Vorbis: the last page's granule position) and
// WebM/Matroska (Segment Info). It reads at most a few hundred KiB, in
// at most mp4MaxBoxes+3 reads at offsets of r (each a range request to an
// object store), and returns 0 when the file does not say (an MP3, a
// browser recording without a duration, an MP4 whose moov is not among
// its first mp4MaxBoxes top-level boxes).
func Duration(r io.ReaderAt, size int64, t string) int64 {
	head := make([]byte, min(size, 64<<10))
	if n, _ := r.ReadAt(head, 0); n < len(head) {
		head = head[:n]
	}
	switch {
	case bytes.HasPrefix(head, []byte("RIFF")) && len(head) >= 12 && string(head[8:12]) == "WAVE":
		return wavDuration(head, size)
	case len(head) >= 8 && string(head[4:8]) == "ftyp":
		return mp4Duration(r, size)
	case bytes.HasPrefix(head, []byte("OggS")):
		return oggDuration(r, size, head)
	case bytes.HasPrefix(head, []byte("\x1A\x45\xDF\xA3")):
		return ebmlDuration(head)
	}
	return 0
}

func wavDuration(b []byte, size int64) int64 {
	var byteRate uint32
	for i := 12; i+8 <= len(b); {
		id, n := string(b[i:i+4]), int64(binary.LittleEndian.Uint32(b[i+4:]))
		switch id {
		case "fmt ":
			if i+16 <= len(b) {
				byteRate = binary.LittleEndian.Uint32(b[i+16:])
			}
		case "data":
			if byteRate == 0 {
				return 0
			}
			n = min(n, size-int64(i)-8)
			return n * 1000 / int64(byteRate)
		}
		i += 8 + int(n) + int(n&1)
		if n < 0 || i < 0 {
			return 0
		}
	}
	return 0
}

// mp4MaxBoxes bounds the top-level boxes walked to the one sought: each
// is a read (a range request to an object store), and real files have a
// handful before it (ftyp, free, wide, mdat; a fragmented one's moov
// comes before its fragments).
const mp4MaxBoxes = 64

// mp4Duration reads moov's mvhd.
func mp4Duration(r io.ReaderAt, size int64) int64 {
	if off, n, ok := topBox(r, size, "moov"); ok {
		return mvhd(r, off, min(n, 1<<20))
	}
	return 0
}

// topBox walks the top-level boxes of an ISO base media file (MP4,
// MOV, HEIF) to the first of type typ among the first mp4MaxBoxes: the
// offset and length of its body.
func topBox(r io.ReaderAt, size int64, typ string) (off, n int64, ok bool) {
	var hdr [16]byte
	for boxes := 0; off+8 <= size && boxes < mp4MaxBoxes; boxes++ {
		if _, err := r.ReadAt(hdr[:8], off); err != nil {
			return 0, 0, false
		}
		n := int64(binary.BigEndian.Uint32(hdr[:]))
		hl := int64(8)
		if n == 1 {
			if _, err := r.ReadAt(hdr[8:16], off+8); err != nil {
				return 0, 0, false
			}
			n, hl = int64(binary.BigEndian.Uint64(hdr[8:])), 16
		} else if n == 0 {
			n = size - off
		}
		if n < hl {
			return 0, 0, false
		}
		if string(hdr[4:8]) == typ {
			return off + hl, n - hl, true
		}
		off += n
	}
	return 0, 0, false
}

func mvhd(r io.ReaderAt, off, n int64) int64 {
	b := make([]byte, n)
	if m, _ := r.ReadAt(b, off); int64(m) < n {
		b = b[:m]
	}
	for i := 0; i+8 <= len(b); {
		sz, typ := int(binary.BigEndian.Uint32(b[i:])), string(b[i+4:i+8])
		if typ == "mvhd" && i+32 <= len(b) {
			v := b[i+8:]
			if v[0] == 1 && len(v) >= 32 { // 64-bit times
				scale, dur := binary.BigEndian.Uint32(v[20:]), binary.BigEndian.Uint64(v[24:])
				return millis(dur, uint64(scale))
			} else if len(v) >= 20 {
				scale, dur := binary.BigEndian.Uint32(v[12:]), binary.BigEndian.Uint32(v[16:])
				return millis(uint64(dur), uint64(scale))
			}
			return 0
		}
		if sz < 8 {
			return 0
		}
		i += sz
	}
	return 0
}

// oggDuration divides the last page's granule position by the stream's
// sample rate (Opus: always 48 kHz, less its pre-skip).
func oggDuration(r io.ReaderAt, size int64, head []byte) int64 {
	var rate, preSkip uint64
	switch {
	case bytes.Contains(head, []byte("OpusHead")):
		i := bytes.Index(head, []byte("OpusHead"))
		if i+12 <= len(head) {
			preSkip = uint64(binary.LittleEndian.Uint16(head[i+10:]))
		}
		rate = 48000
	case bytes.Contains(head, []byte("\x01vorbis")):
		i := bytes.Index(head, []byte("\x01vorbis"))
		if i+16 <= len(head) {
			rate = uint64(binary.LittleEndian.Uint32(head[i+12:]))
		}
	}
	if rate == 0 {
		return 0
	}
	tail := make([]byte, min(size, 64<<10))
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil && err != io.EOF {
		return 0
	}
	i := bytes.LastIndex(tail, []byte("OggS"))
	if i < 0 || i+14 > len(tail) {
		return 0
	}
	g := binary.LittleEndian.Uint64(tail[i+6:])
	if g == math.MaxUint64 || g < preSkip {
		return 0
	}
	return millis(g-preSkip, rate)
}

// ebmlDuration finds Segment/Info's TimecodeScale and Duration in the
// first bytes of a WebM or Matroska file.
func ebmlDuration(b []byte) int64 {
	scale := uint64(1_000_000) // ns per tick, the default
	info := bytes.Index(b, []byte{0x15, 0x49, 0xA9, 0x66})
	if info < 0 {
		return 0
	}
	b = b[info+4:]
	n, l := vint(b)
	if l == 0 {
		return 0
	}
	b = b[l:]
	if n < uint64(len(b)) {
		b = b[:n]
	}
	var dur float64
	for len(b) > 0 {
		id, il := elementID(b)
		if il == 0 {
			break
		}
		sz, sl := vint(b[il:])
		if sl == 0 || uint64(len(b)-il-sl) < sz {
			break
		}
		v := b[il+sl : il+sl+int(sz)]
		switch id {
		case 0x2AD7B1:
			scale = 0
			for _, c := range v {
				scale = scale<<8 | uint64(c)
			}
		case 0x4489:
			switch len(v) {
			case 4:
				dur = float64(math.Float32frombits(binary.BigEndian.Uint32(v)))
			case 8:
				dur = math.Float64frombits(binary.BigEndian.Uint64(v))
			}
		}
		b = b[il+sl+int(sz):]
	}
	if dur <= 0 || math.IsNaN(dur) || math.IsInf(dur, 0) {
		return 0
	}
	ms := dur * float64(scale) / 1e6
	if ms > chat.MaxDurationMs {
		return 0
	}
	return int64(ms)
}

// millis is ticks of perSecond in milliseconds, 0 when unknown (no
// rate) or absurd (the product overflows, or beyond chat.MaxDurationMs:
// a crafted header, never a number that overflows into a negative or
// wrapped durationMs).
func millis(ticks, perSecond uint64) int64 {
	if perSecond == 0 {
		return 0
	}
	hi, lo := bits.Mul64(ticks, 1000)
	if hi >= perSecond {
		return 0
	}
	q, _ := bits.Div64(hi, lo, perSecond)
	if q > chat.MaxDurationMs {
		return 0
	}
	return int64(q)
}

// vint reads an EBML variable-length size.
func vint(b []byte) (uint64, int) {
	v, l := ebmlNumber(b, 8)
	if l == 0 {
		return 0, 0
	}
	return v &^ (1 << (7 * l)), l // the length marker cleared
}

// elementID reads an EBML element id (its marker bits kept).
func elementID(b []byte) (uint64, int) {
	return ebmlNumber(b, 4)
}

// ebmlNumber reads the big-endian number of up to maxLen bytes that starts
// b, its length given by the leading zero bits of its first byte; it
// returns the bytes as they are (length marker included) and how many
// there are, or 0, 0 when b does not start with one.
func ebmlNumber(b []byte, maxLen int) (uint64, int) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0
	}
	l := bits.LeadingZeros8(b[0]) + 1
	if l > maxLen || len(b) < l {
		return 0, 0
	}
	var v uint64
	for _, c := range b[:l] {
		v = v<<8 | uint64(c)
	}
	return v, l
}
