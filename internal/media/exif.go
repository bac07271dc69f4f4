package media

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// HeadLen is how much of a file StripLocation needs: a JPEG's EXIF
// segment is at most 64 KiB and comes first, after at most a JFIF one.
const HeadLen = 256 << 10

// StripLocation removes location data from the start of an image file in
// place, without changing its length (so the rest streams on untouched
// and a stored original keeps its size): the EXIF GPS directory of a
// JPEG, PNG (eXIf) or WebP (EXIF) is emptied and every byte of its values
// zeroed, and an XMP packet that mentions GPS is blanked. The rest of the
// EXIF data stays, orientation included, so photos keep standing upright.
// It reports whether anything changed and the EXIF orientation (0 when
// there is none). Data beyond head is not looked at.
func StripLocation(head []byte, t string) (changed bool, orientation int) {
	switch t {
	case "image/jpeg":
		return stripJPEG(head)
	case "image/png":
		return stripPNG(head)
	case "image/webp":
		return stripWebP(head)
	}
	return false, 0
}

func stripJPEG(b []byte) (changed bool, orientation int) {
	if len(b) < 4 || b[0] != 0xFF || b[1] != 0xD8 {
		return false, 0
	}
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xFF {
			return changed, orientation
		}
		marker := b[i+1]
		if marker == 0xFF { // fill byte
			i++
			continue
		}
		if marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01 {
			i += 2
			continue
		}
		if marker == 0xDA || marker == 0xD9 { // image data: no more metadata
			return changed, orientation
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if n < 2 || i+2+n > len(b) {
			return changed, orientation
		}
		seg := b[i+4 : i+2+n]
		if marker == 0xE1 {
			switch {
			case bytes.HasPrefix(seg, []byte("Exif\x00\x00")):
				c, o := stripTIFF(seg[6:])
				changed = changed || c
				if o != 0 {
					orientation = o
				}
			case len(seg) > len(xmpNS) && bytes.HasPrefix(seg, []byte(xmpNS)) && bytes.Contains(seg, []byte("GPS")):
				blank(seg[len(xmpNS):])
				changed = true
			}
		}
		i += 2 + n
	}
	return changed, orientation
}

const xmpNS = "http://ns.adobe.com/xap/1.0/\x00"

// blank overwrites an XMP packet with spaces: XML readers see an empty
// document, and the length stays.
func blank(b []byte) {
	for i := range b {
		b[i] = ' '
	}
}

func stripPNG(b []byte) (changed bool, orientation int) {
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		return false, 0
	}
	for i := 8; i+12 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[i:]))
		typ := string(b[i+4 : i+8])
		if n < 0 || i+12+n > len(b) || typ == "IDAT" || typ == "IEND" {
			return changed, orientation
		}
		data := b[i+8 : i+8+n]
		fix := false
		switch typ {
		case "eXIf":
			c, o := stripTIFF(data)
			fix, orientation = c, o
		case "iTXt", "tEXt", "zTXt":
			if bytes.HasPrefix(data, []byte("XML:com.adobe.xmp")) && bytes.Contains(data, []byte("GPS")) {
				blank(data[len("XML:com.adobe.xmp"):])
				fix = true
			}
		}
		if fix {
			binary.BigEndian.PutUint32(b[i+8+n:], crc32.ChecksumIEEE(b[i+4:i+8+n]))
			changed = true
		}
		i += 12 + n
	}
	return changed, orientation
}

func stripWebP(b []byte) (changed bool, orientation int) {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return false, 0
	}
	for i := 12; i+8 <= len(b); {
		typ := string(b[i : i+4])
		n := int(binary.LittleEndian.Uint32(b[i+4:]))
		if n < 0 || i+8+n > len(b) {
			return changed, orientation
		}
		data := b[i+8 : i+8+n]
		switch typ {
		case "EXIF":
			tiff := data
			if bytes.HasPrefix(tiff, []byte("Exif\x00\x00")) {
				tiff = tiff[6:]
			}
			c, o := stripTIFF(tiff)
			changed, orientation = changed || c, o
		case "XMP ":
			if bytes.Contains(data, []byte("GPS")) {
				blank(data)
				changed = true
			}
		}
		i += 8 + n + n&1
	}
	return changed, orientation
}

// TIFF tags and type sizes.
const (
	tagOrientation = 0x0112
	tagGPS         = 0x8825
)

var typeSize = map[uint16]int{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}

// stripTIFF empties the GPS directory of an EXIF TIFF block: its values
// and entries zeroed, its count 0 (a valid, empty directory the GPSInfo
// pointer may keep pointing at).
func stripTIFF(t []byte) (changed bool, orientation int) {
	if len(t) < 8 {
		return false, 0
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return false, 0
	}
	ifd0 := int(bo.Uint32(t[4:]))
	count, entries, ok := ifd(t, bo, ifd0)
	if !ok {
		return false, 0
	}
	gps := -1
	for k := 0; k < count; k++ {
		e := entries + 12*k
		switch bo.Uint16(t[e:]) {
		case tagOrientation:
			if o := int(bo.Uint16(t[e+8:])); o >= 1 && o <= 8 {
				orientation = o
			}
		case tagGPS:
			gps = int(bo.Uint32(t[e+8:]))
		}
	}
	if gps < 0 {
		return false, orientation
	}
	gcount, gentries, ok := ifd(t, bo, gps)
	if !ok || gcount == 0 {
		return false, orientation
	}
	for k := 0; k < gcount; k++ {
		e := gentries + 12*k
		size := typeSize[bo.Uint16(t[e+2:])] * int(bo.Uint32(t[e+4:]))
		if size > 4 {
			if off := int(bo.Uint32(t[e+8:])); off >= 0 && size <= len(t) && off <= len(t)-size {
				clear(t[off : off+size])
			}
		}
		clear(t[e : e+12])
	}
	bo.PutUint16(t[gps:], 0)
	return true, orientation
}

// ifd bounds-checks the directory at off: its entry count and where its
// entries start.
func ifd(t []byte, bo binary.ByteOrder, off int) (count, entries int, ok bool) {
	if off < 8 || off+2 > len(t) {
		return 0, 0, false
	}
	count = int(bo.Uint16(t[off:]))
	entries = off + 2
	if entries+12*count > len(t) {
		return 0, 0, false
	}
	return count, entries, true
}
