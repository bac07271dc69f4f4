package media

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
)

// WebM and Matroska: the EBML header, then each Segment's top-level
// elements, walked by their sizes, and the children of those of unknown
// size (a live recording's Clusters), a read buffer at a time; a Tags
// element, where muxers and recorders write the metadata they carry over
// (ffmpeg the location of the phone video it remuxed, under the names
// LOCATION, LOCATION-ENG and COM.APPLE.QUICKTIME.LOCATION.ISO6709), is
// read whole (each Tag or SimpleTag of a Tags of unknown size) and the
// SimpleTags whose names say a location become Void elements of the same
// size, so the file, its Cues and SeekHead offsets and its length stay.

// Element ids (their marker bits kept).
const (
	mkvEBML      = 0x1A45DFA3
	mkvSegment   = 0x18538067
	mkvTags      = 0x1254C367
	mkvTag       = 0x7373
	mkvSimpleTag = 0x67C8
	mkvTagName   = 0x45A3
	mkvTagString = 0x4487
	mkvTagBinary = 0x4485
	mkvCRC32     = 0xBF
	mkvVoid      = 0xEC
)

// mkvLocationNames are what the name of a SimpleTag holding a location
// contains (compared in upper case): the spec's RECORDING_LOCATION and
// COMPOSITION_LOCATION, ffmpeg's LOCATION (and its LOCATION-ENG), Apple's
// COM.APPLE.QUICKTIME.LOCATION.ISO6709 as ffmpeg carries it over, and
// GPS or coordinates under any other name.
var mkvLocationNames = [][]byte{[]byte("LOCATION"), []byte("GPS"), []byte("ISO6709"), []byte("LATITUDE"),
	[]byte("LONGITUDE"), []byte("COORDINATES")}

// mkvHeader reads the element header that starts b: its id, the size of
// its data (unknown: the all-ones size, the element runs to the end of
// its parent), the header's length; hl is 0 when b does not start with
// one.
func mkvHeader(b []byte) (id, size uint64, hl int, unknown bool) {
	id, il := elementID(b)
	if il == 0 {
		return 0, 0, 0, false
	}
	size, sl := vint(b[il:])
	if sl == 0 {
		return 0, 0, 0, false
	}
	return id, size, il + sl, size == 1<<(7*sl)-1
}

// mkvVoidHeader is the header of a Void element n bytes long, header
// included (n at least 2): its id and the shortest size that makes it n;
// nil for n beyond any size field.
func mkvVoidHeader(n int64) []byte {
	for l := 1; l <= 8; l++ {
		if data := n - 1 - int64(l); data >= 0 && data < 1<<(7*l)-1 {
			h := make([]byte, 1+l)
			h[0] = mkvVoid
			v := uint64(data) | 1<<(7*l)
			for i := l; i >= 1; i-- {
				h[i], v = byte(v), v>>8
			}
			return h
		}
	}
	return nil
}

// mkvVoidOut makes the element b a Void element of its size, its bytes
// zeros.
func mkvVoidOut(b []byte) {
	h := mkvVoidHeader(int64(len(b)))
	clear(b[copy(b, h):])
}

// mkvElement walks the next elements: at the top level (the EBML header,
// Segments) or in a Segment (s.boxes holds its end and, innermost, each
// Tags of unknown size it is in).
func (s *stripper) mkvElement() error {
	h, _ := s.br.Peek(12) // less at the end of the file
	if out := s.mkvRun(); len(out) > 0 {
		s.out = out
		return nil
	}
	// Not in the buffer: the top level, or an element larger than what
	// is buffered.
	id, size, hl, unknown := mkvHeader(h)
	n := int64(hl) + int64(size)
	switch {
	case hl == 0 || size > math.MaxInt64-uint64(hl) || unknown && id != mkvSegment:
		// The end, or not an element a player would read: the rest goes
		// through as it is.
		s.step = (*stripper).rest
		return nil
	case id == mkvSegment && len(s.boxes) == 0:
		end := int64(math.MaxInt64) // an unknown size: to the end of the file
		if !unknown {
			end = s.pos + n
		}
		s.boxes = append(s.boxes, mp4Open{end, "Segment"})
		s.emit(h, hl)
		s.pos += int64(hl)
		return nil
	case !s.mkvUnit(id):
		s.pos += n
		s.passThen(n, false, (*stripper).mkvElement)
		return nil
	case n > maxUnit:
		// Too large to hold (no muxer writes one; pictures go to
		// Attachments): a Void whole.
		v := mkvVoidHeader(n)
		if len(v) == 0 || len(v) > len(h) {
			s.step = (*stripper).rest
			return nil
		}
		copy(s.hdr[:], v)
		s.out = s.hdr[:len(v)]
		_, _ = s.br.Discard(len(v))
		s.pos += n
		s.passThen(n-int64(len(v)), true, (*stripper).mkvElement)
		return nil
	}
	b, err := s.whole(int(n))
	if err != nil {
		return err
	}
	s.pos += n
	s.mkvStrip(id, b, hl)
	s.out = b
	return nil
}

// mkvRun walks the elements of a Segment that are whole in the read
// buffer and returns them, stripped (none when the next is not one). An
// element of unknown size is entered, its children walked as the
// Segment's are: a live recording's Cluster (a browser's MediaRecorder, a
// phone's or a camera's recorder) has one and ends where an element that
// is not its child starts, so the Tags after it are found by walking its
// blocks; a Tags of unknown size (ffmpeg reads one) has its Tags stripped
// one by one, and those of unknown size their SimpleTags (mkvStrip).
// Elements are walked a buffer at a time, not a step and a read each, so
// a file of many tiny elements costs a walk of its bytes.
func (s *stripper) mkvRun() []byte {
	b, _ := s.br.Peek(s.br.Buffered())
	n := 0
	var out []byte // b[:n], copied once an element in it is stripped
	for {
		id, size, hl, unknown := mkvHeader(b[n:])
		s.mkvClose(id, hl)
		if len(s.boxes) == 0 || hl == 0 || !unknown && size > uint64(len(b)-n-hl) {
			break
		}
		e := n + hl + int(size)
		switch {
		case unknown:
			e = n + hl
			switch {
			case id == mkvTags:
				s.boxes = append(s.boxes, mp4Open{s.boxes[len(s.boxes)-1].end, "Tags"})
				s.mkvLocated = true // no SimpleTag named yet
			case id == mkvSimpleTag && s.mkvInTags():
				s.mkvLocated = true // its name is not known yet
			}
		case s.mkvUnit(id):
			if out == nil {
				out = append(s.unit[:0], b[:n]...)
			}
			out = append(out, b[n:e]...)
			s.mkvStrip(id, out[n:], hl)
		}
		if out != nil && len(out) < e {
			out = append(out, b[len(out):e]...)
		}
		s.pos += int64(e - n)
		n = e
	}
	if out == nil {
		out = b[:n]
	} else {
		s.unit = out
	}
	_, _ = s.br.Discard(n)
	return out
}

// mkvInTags says whether the walk is in a Tags of unknown size.
func (s *stripper) mkvInTags() bool {
	return len(s.boxes) > 0 && s.boxes[len(s.boxes)-1].typ == "Tags"
}

// mkvUnit says whether the element id is held whole and stripped: a Tags
// in a Segment; in a Tags of unknown size, a Tag, a SimpleTag, and the
// name and value of a SimpleTag of unknown size.
func (s *stripper) mkvUnit(id uint64) bool {
	switch id {
	case mkvTags:
		return len(s.boxes) > 0
	case mkvTag, mkvSimpleTag, mkvTagName, mkvTagString, mkvTagBinary:
		return s.mkvInTags()
	}
	return false
}

// mkvTagsChildren are the elements a Tags holds, at any depth (Targets
// and its children, the SimpleTag's language and default flag too): a
// Tags of unknown size ends at the first other element.
var mkvTagsChildren = map[uint64]bool{mkvTag: true, 0x63C0: true, 0x68CA: true, 0x63CA: true, 0x63C5: true,
	0x63C9: true, 0x63C4: true, 0x63C6: true, mkvSimpleTag: true, mkvTagName: true, 0x447A: true, 0x447B: true,
	0x4484: true, 0x44B4: true, mkvTagString: true, mkvTagBinary: true, mkvVoid: true, mkvCRC32: true}

// mkvClose leaves the Segment when the walk is at its end, and the Tags
// of unknown size the walk is in when the next element (id, its header
// hl bytes; none read when 0) is not one of what it holds.
func (s *stripper) mkvClose(id uint64, hl int) {
	for len(s.boxes) > 0 {
		in := s.boxes[len(s.boxes)-1]
		if s.pos < in.end && (in.typ != "Tags" || hl == 0 || mkvTagsChildren[id]) {
			return
		}
		s.boxes = s.boxes[:len(s.boxes)-1]
	}
}

// mkvStrip strips b, a unit (mkvUnit) of type id whose header is hl
// bytes, in place: a Tags', a Tag's or a SimpleTag's SimpleTags naming a
// location become Void elements, and so does b when no Tag (or
// SimpleTag) is left in it, or when it is a SimpleTag naming one. The
// value of a SimpleTag of unknown size (its element can be neither held
// nor made a Void) becomes a Void when the SimpleTag's name, read before
// it, says a location, or when no name came before it.
func (s *stripper) mkvStrip(id uint64, b []byte, hl int) {
	switch id {
	case mkvTags:
		if kept, changed := mkvChildren(b[hl:], mkvTag, mkvTagKept); changed && kept == 0 {
			mkvVoidOut(b) // a Tags holds at least one Tag
		}
	case mkvTag:
		if keep, _ := mkvTagKept(b[hl:]); !keep {
			mkvVoidOut(b)
		}
	case mkvSimpleTag:
		if keep, _ := mkvSimpleTagKept(1)(b[hl:]); !keep {
			mkvVoidOut(b)
		}
	case mkvTagName:
		s.mkvLocated = mkvLocationName(b[hl:])
	case mkvTagString, mkvTagBinary:
		if s.mkvLocated {
			mkvVoidOut(b)
		}
	}
}

// mkvChildren walks the children of type id of a master element's data
// b, keeping each one keep says to keep (it may change it) and making
// the others Void elements: how many are kept, and whether b changed. A
// CRC-32 element first in b is computed again when it did.
func mkvChildren(b []byte, id uint64, keep func(data []byte) (bool, bool)) (kept int, changed bool) {
	for rest := b; len(rest) > 0; {
		cid, size, hl, unknown := mkvHeader(rest)
		if hl == 0 || unknown || size > uint64(len(rest)-hl) {
			break
		}
		n := hl + int(size)
		if cid == id {
			ok, ch := keep(rest[hl:n])
			if !ok {
				mkvVoidOut(rest[:n])
				ch = true
			} else {
				kept++
			}
			changed = changed || ch
		}
		rest = rest[n:]
	}
	if changed && len(b) >= 6 && b[0] == mkvCRC32 && b[1] == 0x84 {
		binary.LittleEndian.PutUint32(b[2:], crc32.ChecksumIEEE(b[6:]))
	}
	return kept, changed
}

// mkvTagKept strips a Tag: its SimpleTags naming a location go; so does
// the Tag when none is left (a Tag holds at least one).
func mkvTagKept(data []byte) (keep, changed bool) {
	kept, changed := mkvChildren(data, mkvSimpleTag, mkvSimpleTagKept(1))
	return !changed || kept > 0, changed
}

// mkvMaxDepth bounds the nesting of SimpleTags walked (real files nest
// one or two): a SimpleTag deeper goes, so that a crafted file costs no
// deep recursion.
const mkvMaxDepth = 8

// mkvSimpleTagKept says whether a SimpleTag at depth stays: not when
// its name says a location, nor beyond mkvMaxDepth; its nested SimpleTags
// are stripped alike.
func mkvSimpleTagKept(depth int) func(data []byte) (keep, changed bool) {
	return func(data []byte) (keep, changed bool) {
		if depth > mkvMaxDepth {
			return false, false
		}
		if mkvNamesLocation(data) {
			return false, false
		}
		_, changed = mkvChildren(data, mkvSimpleTag, mkvSimpleTagKept(depth+1))
		return true, changed
	}
}

// mkvNamesLocation says whether the SimpleTag's data has a TagName
// holding one of mkvLocationNames.
func mkvNamesLocation(data []byte) bool {
	for rest := data; len(rest) > 0; {
		id, size, hl, unknown := mkvHeader(rest)
		if hl == 0 || unknown || size > uint64(len(rest)-hl) {
			break
		}
		if id == mkvTagName && mkvLocationName(rest[hl:hl+int(size)]) {
			return true
		}
		rest = rest[hl+int(size):]
	}
	return false
}

// mkvLocationName says whether a TagName holds one of mkvLocationNames.
func mkvLocationName(name []byte) bool {
	name = bytes.ToUpper(name)
	for _, w := range mkvLocationNames {
		if bytes.Contains(name, w) {
			return true
		}
	}
	return false
}
