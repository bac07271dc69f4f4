package media

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"io"
	"math"
	"slices"
)

// HEIF (HEIC, AVIF): top-level boxes up to the meta, whose item
// information (iinf) and locations (iloc) say where the Exif and XMP
// items are; those that follow the meta are stripped as the file passes
// them, those in the meta (its idat) at once.

// IsHEIF says t is an image type of the HEIF container (HEIC, AVIF),
// whose size HEIFSize reads.
func IsHEIF(t string) bool {
	switch t {
	case "image/heic", "image/heif", "image/avif", "image/heic-sequence", "image/heif-sequence":
		return true
	}
	return false
}

// heifItem is a metadata item of a HEIF file: an Exif item, or an XMP
// packet (encoded: under a content encoding, unreadable here) and its
// extents, in the order they make the item.
type heifItem struct {
	xmp, encoded bool
	ext          []heifExtent
}

// heifExtent is a run of the file's bytes: its offset and length.
type heifExtent struct{ off, n int64 }

// heifAction is what happens to the bytes from start to end: held whole
// and the items in them stripped, or, items too large to hold together,
// zeroed.
type heifAction struct {
	start, end int64
	items      []heifItem
	zero       bool
}

// maxHEIFItems bounds the metadata items of a file stripped one by one
// (a photo has one or two): more in the meta make it all zeros (the
// file no longer reads), more after it are zeroed, so that a crafted
// file costs at most this many items' reading.
const maxHEIFItems = 64

func (s *stripper) heifStart() error {
	b := s.peek(8)
	if b == nil {
		return nil
	}
	if string(b[4:8]) != "ftyp" {
		s.step = (*stripper).rest
		return nil
	}
	s.step = (*stripper).heifBox
	return nil
}

// heifBox walks the top-level boxes to the meta.
func (s *stripper) heifBox() error {
	_, n, hl, typ, ok := s.boxHeader()
	if !ok {
		return nil
	}
	if n < int64(hl) {
		// Size 0 (the box runs to the end of the file) or a box no
		// reader would read: the rest goes through as it is.
		s.step = (*stripper).rest
		return nil
	}
	if typ != "meta" || n > maxUnit {
		// A meta over maxUnit (no camera writes one) is not read.
		s.pos += n
		s.passThen(n, false, (*stripper).heifBox)
		return nil
	}
	b, err := s.whole(int(n))
	if err != nil {
		return err
	}
	s.heifMeta(b, hl)
	s.pos += n
	s.out = b
	s.step = (*stripper).heifItems
	return nil
}

// heifMeta reads the meta box b (at s.pos, its header hl bytes): it
// strips the items inside it and plans those after it. An item with bytes
// before the meta's end, outside it, has passed already and stays as it
// is.
func (s *stripper) heifMeta(b []byte, hl int) {
	if len(b) < hl+4 {
		return
	}
	var iinf, iloc, idat []byte
	eachBox(b[hl+4:], func(typ string, body []byte) {
		switch typ {
		case "iinf":
			iinf = body
		case "iloc":
			iloc = body
		case "idat":
			idat = body
		}
	})
	kinds := heifItemKinds(iinf)
	if len(kinds) == 0 {
		return
	}
	start, end := s.pos, s.pos+int64(len(b))
	var later []heifItem
	over := false
	strip := func(it heifItem, b []byte, base int64) {
		if s.heifN++; s.heifN > maxHEIFItems {
			over = true
			return
		}
		s.heifStrip(it, b, base)
	}
	heifLocations(iloc, func(id uint32, method int, ext []heifExtent) {
		it, ok := kinds[id]
		if !ok || len(ext) == 0 {
			return
		}
		it.ext = ext
		switch method {
		case 0: // offsets into the file
			switch {
			case all(ext, func(e heifExtent) bool { return e.off >= end }):
				later = append(later, it)
			case all(ext, func(e heifExtent) bool { return e.off >= start && e.off+e.n <= end }):
				strip(it, b, start)
			}
		case 1: // offsets into the idat
			if all(ext, func(e heifExtent) bool { return e.off+e.n <= int64(len(idat)) }) {
				strip(it, idat, 0)
			}
		}
	})
	if over {
		clear(b[hl+4:])
	}
	s.heifPlan(later)
}

func all(ext []heifExtent, f func(heifExtent) bool) bool {
	return !slices.ContainsFunc(ext, func(e heifExtent) bool { return !f(e) })
}

// heifPlan orders the actions on the items after the meta: items whose
// bytes overlap are held together, within maxUnit; more than that is
// zeroed as it passes, and so are the items beyond maxHEIFItems.
func (s *stripper) heifPlan(items []heifItem) {
	// An item's extents are in the order its bytes make it, not
	// necessarily the file's.
	span := func(it heifItem) (start, end int64) {
		start = math.MaxInt64
		for _, e := range it.ext {
			start, end = min(start, e.off), max(end, e.off+e.n)
		}
		return start, end
	}
	slices.SortStableFunc(items, func(a, b heifItem) int {
		sa, _ := span(a)
		sb, _ := span(b)
		return cmp.Compare(sa, sb)
	})
	var acts []heifAction
	for i := 0; i < len(items); {
		a := heifAction{}
		a.start, a.end = span(items[i])
		j := i + 1
		for ; j < len(items); j++ {
			st, en := span(items[j])
			if st >= a.end {
				break
			}
			a.end = max(a.end, en)
		}
		if a.end-a.start <= maxUnit && s.heifN+j-i <= maxHEIFItems {
			s.heifN += j - i
			a.items = items[i:j]
			acts = append(acts, a)
		} else {
			for _, it := range items[i:j] {
				for _, e := range it.ext {
					acts = append(acts, heifAction{start: e.off, end: e.off + e.n, zero: true})
				}
			}
		}
		i = j
	}
	slices.SortStableFunc(acts, func(a, b heifAction) int { return cmp.Compare(a.start, b.start) })
	s.heifActs = acts
}

// heifItems passes the file through to the next planned action, and does
// it.
func (s *stripper) heifItems() error {
	for len(s.heifActs) > 0 && s.heifActs[0].end <= s.pos {
		s.heifActs = s.heifActs[1:] // zeroed extents overlapping ones before
	}
	if len(s.heifActs) == 0 {
		s.step = (*stripper).rest
		return nil
	}
	a := s.heifActs[0]
	if a.start > s.pos {
		n := a.start - s.pos
		s.pos += n
		s.passThen(n, false, (*stripper).heifItems)
		return nil
	}
	s.heifActs = s.heifActs[1:]
	n := a.end - s.pos
	if a.zero {
		s.pos += n
		s.passThen(n, true, (*stripper).heifItems)
		return nil
	}
	b, err := s.whole(int(n))
	if err != nil {
		return err
	}
	for _, it := range a.items {
		s.heifStrip(it, b, a.start)
	}
	s.pos += n
	s.out = b
	return nil
}

// heifStrip strips item it, whose extents are offsets of b (from base
// on): an Exif item loses its GPS directory as a JPEG's EXIF does, an XMP
// packet mentioning a location, or encoded, is blanked; an item whose
// extents add up to over maxUnit is zeroed.
func (s *stripper) heifStrip(it heifItem, b []byte, base int64) {
	parts := make([][]byte, len(it.ext))
	total := 0
	for i, e := range it.ext {
		parts[i] = b[e.off-base : e.off-base+e.n]
		total += len(parts[i])
	}
	if total > maxUnit {
		// Extents over the same bytes many times (no writer's): put
		// together, they would cost many times the file; the item's
		// bytes are zeroed instead.
		for _, p := range parts {
			clear(p)
		}
		return
	}
	data := parts[0]
	if len(parts) > 1 {
		data = bytes.Join(parts, nil)
	}
	if it.xmp {
		if it.encoded || mentionsLocation(data) {
			for _, p := range parts {
				blank(p)
			}
		}
		return
	}
	// An Exif item: the offset of the TIFF header, what precedes it
	// ("Exif\0\0"), the TIFF block.
	if len(data) < 4 {
		return
	}
	off := uint64(binary.BigEndian.Uint32(data))
	if off > uint64(len(data)-4) {
		return
	}
	if !s.exif(data[4+off:]) || len(parts) == 1 {
		return
	}
	for _, p := range parts {
		data = data[copy(p, data):]
	}
}

// eachBox calls f with the type and body of each box in b, to the first
// that does not fit.
func eachBox(b []byte, f func(typ string, body []byte)) {
	for len(b) >= 8 {
		n, hl := uint64(binary.BigEndian.Uint32(b)), uint64(8)
		switch n {
		case 0:
			n = uint64(len(b))
		case 1:
			if len(b) < 16 {
				return
			}
			n, hl = binary.BigEndian.Uint64(b[8:]), 16
		}
		if n < hl || n > uint64(len(b)) {
			return
		}
		f(string(b[4:8]), b[hl:n])
		b = b[n:]
	}
}

// field reads big-endian unsigned integers of 0 to 8 bytes and
// NUL-terminated strings from a box's body; ok turns false on the first
// read past its end.
type field struct {
	b  []byte
	ok bool
}

func (r *field) uint(n int) uint64 {
	if !r.ok || n > len(r.b) {
		r.ok = false
		return 0
	}
	var v uint64
	for _, c := range r.b[:n] {
		v = v<<8 | uint64(c)
	}
	r.b = r.b[n:]
	return v
}

func (r *field) str() string {
	i := bytes.IndexByte(r.b, 0)
	if !r.ok || i < 0 {
		r.ok = false
		return ""
	}
	s := string(r.b[:i])
	r.b = r.b[i+1:]
	return s
}

// heifItemKinds reads the item information box: the metadata items by
// their id (their extents not known yet).
func heifItemKinds(iinf []byte) map[uint32]heifItem {
	if len(iinf) < 6 {
		return nil
	}
	rest := iinf[4+2:] // version and flags; the count, 16 bits in version 0
	if iinf[0] != 0 {
		rest = iinf[min(len(iinf), 4+4):]
	}
	kinds := map[uint32]heifItem{}
	eachBox(rest, func(typ string, body []byte) {
		if typ != "infe" || len(body) < 4 || body[0] < 2 {
			return // before version 2 an item has no type
		}
		r := field{body[4:], true}
		id := uint32(r.uint(2))
		if body[0] >= 3 {
			id = uint32(r.uint(4))
		}
		r.uint(2) // protection index
		itemType := string(r.b[:min(4, len(r.b))])
		r.uint(4)
		r.str() // name
		switch {
		case !r.ok:
		case itemType == "Exif":
			kinds[id] = heifItem{}
		case itemType == "mime":
			ctype := r.str()
			if r.ok && ctype == "application/rdf+xml" {
				encoding := r.str()
				kinds[id] = heifItem{xmp: true, encoded: r.ok && encoding != ""}
			}
		}
	})
	return kinds
}

// heifLocations reads the item location box, calling f with each item's
// id, construction method (0: offsets into the file, 1: into the meta's
// idat, 2: into other items) and extents (base offset added). An item
// with an extent of length 0 (to the end of what it is in) or beyond
// 2^63 is left out.
func heifLocations(iloc []byte, f func(id uint32, method int, ext []heifExtent)) {
	if len(iloc) < 6 || iloc[0] > 2 {
		return
	}
	v := iloc[0]
	r := field{iloc[4:], true}
	sizes := r.uint(2)
	offSize, lenSize, baseSize, indexSize := int(sizes>>12), int(sizes>>8&15), int(sizes>>4&15), int(sizes&15)
	if v == 0 {
		indexSize = 0
	}
	for _, n := range []int{offSize, lenSize, baseSize, indexSize} {
		if n != 0 && n != 4 && n != 8 {
			return
		}
	}
	if lenSize == 0 {
		return // every extent of length 0: no item is read
	}
	idSize := 2
	if v == 2 {
		idSize = 4
	}
	count := r.uint(idSize)
	for ; count > 0 && r.ok; count-- {
		id := uint32(r.uint(idSize))
		method := 0
		if v > 0 {
			method = int(r.uint(2) & 15)
		}
		r.uint(2) // data reference index
		base := r.uint(baseSize)
		n := r.uint(2)
		// Each extent takes its bytes: what they cost is what the
		// iloc holds.
		if !r.ok || n*uint64(indexSize+offSize+lenSize) > uint64(len(r.b)) {
			return
		}
		ext := make([]heifExtent, 0, n)
		whole := true
		for ; n > 0; n-- {
			r.uint(indexSize)
			off, length := r.uint(offSize), r.uint(lenSize)
			if base > math.MaxInt64 || off > math.MaxInt64-base || length == 0 || length > math.MaxInt64-base-off {
				whole = false
			}
			ext = append(ext, heifExtent{int64(base + off), int64(length)})
		}
		if r.ok && whole {
			f(id, method, ext)
		}
	}
}

// HEIFSize reads the size a HEIF image (HEIC, AVIF) is shown at from its
// container, since chatd does not decode it: the image spatial extent
// (ispe) of the primary item (pitm), changed by the transformative
// properties ipma associates with it, in their order there: a clean
// aperture (clap) crops it, a rotation (irot) by a quarter or three
// quarters swaps width and height (a mirror, imir, changes neither). An
// Exif orientation in the file is not applied: HEIF readers turn the
// picture by irot alone. It reads the top-level boxes to the meta and the
// meta (at most maxUnit); ok is false when the file does not say, or
// says a size beyond 2^31-1 pixels a side.
func HEIFSize(r io.ReaderAt, size int64) (s Size, ok bool) {
	off, n, found := topBox(r, size, "meta")
	if !found || n < 4 || n > maxUnit {
		return Size{}, false
	}
	meta := make([]byte, n)
	if _, err := r.ReadAt(meta, off); err != nil {
		return Size{}, false
	}
	primary, hasPrimary := uint32(0), false
	type property struct {
		typ  string
		body []byte
	}
	var ipco []property // index 1 first
	var ipma [][]byte
	eachBox(meta[4:], func(typ string, body []byte) {
		switch typ {
		case "pitm":
			r := field{body, true}
			if v := r.uint(4) >> 24; v == 0 {
				primary = uint32(r.uint(2))
			} else {
				primary = uint32(r.uint(4))
			}
			hasPrimary = r.ok
		case "iprp":
			eachBox(body, func(typ string, body []byte) {
				switch typ {
				case "ipco":
					eachBox(body, func(typ string, body []byte) {
						ipco = append(ipco, property{typ, body})
					})
				case "ipma":
					ipma = append(ipma, body)
				}
			})
		}
	})
	if !hasPrimary {
		return Size{}, false
	}
	w, h := int64(-1), int64(-1)
	for _, p := range heifProperties(ipma, primary) {
		if p < 1 || p > len(ipco) {
			continue
		}
		typ, body := ipco[p-1].typ, ipco[p-1].body
		switch {
		case typ == "ispe" && len(body) >= 12:
			w, h = int64(binary.BigEndian.Uint32(body[4:])), int64(binary.BigEndian.Uint32(body[8:]))
		case typ == "clap" && len(body) >= 16 && w > 0:
			// Fractions, rounded as libheif rounds them.
			wn, wd := int64(binary.BigEndian.Uint32(body)), int64(binary.BigEndian.Uint32(body[4:]))
			hn, hd := int64(binary.BigEndian.Uint32(body[8:])), int64(binary.BigEndian.Uint32(body[12:]))
			if wd > 0 && hd > 0 {
				if cw, ch := (wn+wd/2)/wd, (hn+hd/2)/hd; cw > 0 && ch > 0 && cw <= w && ch <= h {
					w, h = cw, ch
				}
			}
		case typ == "irot" && len(body) >= 1:
			if body[0]&1 == 1 { // 90 or 270 degrees, anticlockwise
				w, h = h, w
			}
		}
	}
	if w <= 0 || h <= 0 || w > math.MaxInt32 || h > math.MaxInt32 {
		return Size{}, false
	}
	return Size{Width: int(w), Height: int(h)}, true
}

// heifProperties reads the item property associations (ipma boxes): the
// indices into ipco (from 1) of item id's properties, in their order.
func heifProperties(ipma [][]byte, id uint32) []int {
	var props []int
	for _, b := range ipma {
		r := field{b, true}
		vf := r.uint(4)
		version, wide := vf>>24, vf&1 == 1
		for count := r.uint(4); count > 0 && r.ok; count-- {
			var item uint32
			if version < 1 {
				item = uint32(r.uint(2))
			} else {
				item = uint32(r.uint(4))
			}
			n := int(r.uint(1))
			for ; n > 0 && r.ok; n-- {
				var p int
				if wide {
					p = int(r.uint(2) & 0x7FFF)
				} else {
					p = int(r.uint(1) & 0x7F)
				}
				if item == id && r.ok {
					props = append(props, p)
				}
			}
			if item == id {
				return props
			}
		}
	}
	return props
}
