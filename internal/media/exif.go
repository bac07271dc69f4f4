package media

import (
	"encoding/binary"
)

// TIFF tags and type sizes.
const (
	tagOrientation = 0x0112
	tagSubIFDs     = 0x014A
	tagExifIFD     = 0x8769
	tagGPS         = 0x8825
)

var typeSize = map[uint16]int{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}

// maxIFDs bounds the directories walked for GPSInfo pointers (a real
// file has a handful: IFD0, IFD1, the Exif IFD, a few SubIFDs), so a
// crafted block of many costs no more than a few.
const maxIFDs = 64

// stripTIFF empties every GPS directory of an EXIF TIFF block: its values
// and entries zeroed, its count 0 (a valid, empty directory the GPSInfo
// pointer may keep pointing at). Readers follow a GPSInfo pointer in any
// directory, so all are walked: IFD0 and the directories after it
// (IFD1), the Exif IFD and SubIFDs, each once. The orientation is IFD0's.
// A block whose directories list more GPSInfo pointers, or whose GPS
// directories more entries, than it holds is zeroed whole (no
// orientation then).
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
	todo, seen := []int{int(bo.Uint32(t[4:]))}, map[int]bool{}
	var gps []int
	for len(todo) > 0 && len(seen) < maxIFDs {
		off := todo[0]
		todo = todo[1:]
		if seen[off] {
			continue
		}
		seen[off] = true
		count, entries, ok := ifd(t, bo, off)
		if !ok {
			continue
		}
		for k := 0; k < count; k++ {
			e := entries + 12*k
			switch bo.Uint16(t[e:]) {
			case tagOrientation:
				if o := int(bo.Uint16(t[e+8:])); o >= 1 && o <= 8 && len(seen) == 1 {
					orientation = o
				}
			case tagGPS:
				if len(gps) > len(t)/12 {
					// More pointers than the block holds entries:
					// directories laid over one another (no writer's).
					clear(t)
					return true, 0
				}
				gps = append(gps, int(bo.Uint32(t[e+8:])))
			case tagExifIFD:
				todo = append(todo, int(bo.Uint32(t[e+8:])))
			case tagSubIFDs:
				todo = appendSubIFDs(todo, t, bo, e)
			}
			todo = todo[:min(len(todo), maxIFDs)]
		}
		if next := entries + 12*count; next+4 <= len(t) {
			if n := int(bo.Uint32(t[next:])); n != 0 && len(todo) < maxIFDs {
				todo = append(todo, n)
			}
		}
	}
	// The GPS directories' entries are at most what the block holds;
	// more are directories laid over one another (no writer's), each a
	// walk of much of the block: such a block is zeroed whole.
	left := len(t) / 12
	for _, g := range gps {
		if count, _, ok := ifd(t, bo, g); ok {
			if left -= count; left < 0 {
				clear(t)
				return true, 0
			}
		}
		if clearGPS(t, bo, g) {
			changed = true
		}
	}
	return changed, orientation
}

// appendSubIFDs appends to todo, up to maxIFDs, the offsets a SubIFDs
// entry (at e) lists: its value when there is one, else the array its
// value points to.
func appendSubIFDs(todo []int, t []byte, bo binary.ByteOrder, e int) []int {
	n, size := int(bo.Uint32(t[e+4:])), typeSize[bo.Uint16(t[e+2:])]
	if n <= 1 || size != 4 {
		return append(todo, int(bo.Uint32(t[e+8:])))
	}
	at := int(bo.Uint32(t[e+8:]))
	n = min(n, maxIFDs-len(todo))
	if n <= 0 || at < 0 || at > len(t)-4*n {
		return todo
	}
	for i := range n {
		todo = append(todo, int(bo.Uint32(t[at+4*i:])))
	}
	return todo
}

// clearGPS empties the GPS directory at off; true when it had entries.
func clearGPS(t []byte, bo binary.ByteOrder, off int) bool {
	count, entries, ok := ifd(t, bo, off)
	if !ok || count == 0 {
		return false
	}
	for k := 0; k < count; k++ {
		e := entries + 12*k
		size := typeSize[bo.Uint16(t[e+2:])] * int(bo.Uint32(t[e+4:]))
		if size > 4 {
			if off := int(bo.Uint32(t[e+8:])); off >= 0 && size <= len(t) && off <= len(t)-size {
				clear(t[off : off+size])
			}
		}
		clear(t[e : e+12])
	}
	bo.PutUint16(t[off:], 0)
	return true
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
