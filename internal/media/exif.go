package media

import (
	"encoding/binary"
)

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
