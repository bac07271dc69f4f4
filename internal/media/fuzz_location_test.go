package media_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"slices"
	"testing"

	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// located is a file carrying a location, and where and how a unit of
// the fuzzer's (a segment, chunk, box or extension of its kind and
// bytes) is put among its own so that the file still reads as its
// format: at offset at, as unit makes it (nil: nowhere, only bytes
// appended).
type located struct {
	ctype string
	bytes []byte
	at    int
	unit  func(kind byte, data []byte) []byte
}

// plantedLocations are the positions the located files carry, as their
// bytes.
var plantedLocations = [][]byte{mediatest.Latitude, latitude(47), mediatest.XMPLatitude,
	mediatest.VideoLocation, mediatest.LociName, mediatest.PlaceName, []byte("-93.4259758")}

func pngUnit(typ string, data []byte) []byte {
	c := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	c = append(append(c, typ...), data...)
	return binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
}

func jpegUnit(marker byte, data []byte) []byte {
	data = data[:min(len(data), 65533)]
	return append([]byte{0xFF, marker, byte((len(data) + 2) >> 8), byte(len(data) + 2)}, data...)
}

// locatedFiles are the package's test files with a location, in every
// layout the strip walks.
func locatedFiles() []located {
	exif := tiffBlock([]tiffDir{{entries: []tiffEntry{{tag: 0x8825, typ: 4, count: 1, ref: 1}}, next: -1}, {lat: 47, next: -1}})
	xmp := []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" ` +
		string(mediatest.XMPLatitude) + `/></rdf:RDF></x:xmpmeta>`)
	drone := append([]byte("http://ns.adobe.com/xap/1.0/\x00"), `<rdf:Description drone-dji:GpsLongtitude="-93.4259758"/>`...)
	irb := append([]byte("Photoshop 3.0\x008BIM\x04\x22\x00\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(exif)))...)
	irb = append(irb, exif...)
	plainJPEG, plainPNG := mediatest.JPEG(8, 8), mediatest.PNG(8, 8)
	png := func(before int, chunks ...[]byte) []byte {
		return bytes.Join([][]byte{plainPNG[:before], bytes.Join(chunks, nil), plainPNG[before:]}, nil)
	}
	iend := len(plainPNG) - 12
	jpeg := func(segments ...[]byte) []byte {
		return bytes.Join([][]byte{plainJPEG[:2], bytes.Join(segments, nil), plainJPEG[2:]}, nil)
	}
	pngKinds := []string{"tEXt", "iTXt", "zTXt", "eXIf", "exIf", "zxIf", "tXMP", "IEND", "IDAT", "iCCP"}
	inPNG := func(kind byte, data []byte) []byte { return pngUnit(pngKinds[int(kind)%len(pngKinds)], data) }
	inJPEG := func(kind byte, data []byte) []byte { return jpegUnit(0xE0+kind%17, data) } // APP0-15, and 0xF0 read as one
	mp4Kinds := []string{"free", "uuid", "moov", "meta", "udta", "mdat", "skip", "wide", "trak", "XMP_"}
	inMP4 := func(kind byte, data []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(data)))
		return append(append(b, mp4Kinds[int(kind)%len(mp4Kinds)]...), data...)
	}
	webpKinds := []string{"EXIF", "XMP ", "ICCP", "ANIM", "ALPH", "abcd"}
	inWebP := func(kind byte, data []byte) []byte {
		c := append([]byte(webpKinds[int(kind)%len(webpKinds)]), binary.LittleEndian.AppendUint32(nil, uint32(len(data)))...)
		c = append(c, data...)
		if len(data)%2 == 1 {
			c = append(c, 0)
		}
		return c
	}
	inGIF := func(kind byte, data []byte) []byte { // an extension of label kind, data in sub-blocks
		e := []byte{0x21, kind}
		for ; len(data) > 0; data = data[min(len(data), 255):] {
			e = append(append(e, byte(min(len(data), 255))), data[:min(len(data), 255)]...)
		}
		return append(e, 0)
	}
	webmKinds := []uint32{0xA3, 0xA0, 0xEC, 0xBF, 0x7373, 0x1254C367, 0x1F43B675, 0x1C53BB6B, 0x67C8, 0x4487}
	inWebM := func(kind byte, data []byte) []byte { // an element of id kind, its size 8 bytes long
		e := binary.BigEndian.AppendUint32(nil, webmKinds[int(kind)%len(webmKinds)])
		e = bytes.TrimLeft(e, "\x00")
		return append(binary.BigEndian.AppendUint64(e, uint64(len(data))|1<<56), data...)
	}
	recorded := mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 64, UnknownSegment: true, UnknownCluster: true, UnknownTags: true, CRC: true})
	unsized := mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 64, UnknownSegment: true, UnknownCluster: true, UnknownTags: true, UnknownTag: true})
	gif := mediatest.GIFWithLocation(4, 4, 64)
	files := []located{
		{"image/jpeg", mediatest.JPEGWithLocation(4, 4, 6), 2, inJPEG},
		{"image/jpeg", mediatest.JPEGWithHiddenLocation(4, 4), 2, inJPEG},
		{"image/jpeg", mediatest.JPEGWithPlaceNames(4, 4), 2, inJPEG},
		{"image/jpeg", jpeg(jpegUnit(0xED, irb), jpegUnit(0xE1, drone)), 2, inJPEG},
		{"image/png", mediatest.PNGWithLocationAfterIDAT(4, 4, 6), 33, inPNG},
		{"image/png", png(33, pngUnit("exIf", exif), pngUnit("zxIf", exif)), 33, inPNG},
		{"image/png", png(iend, pngUnit("tXMP", xmp)), 33, inPNG},
		{"image/png", append(png(iend), pngUnit("eXIf", exif)...), 33, inPNG},
		{"image/webp", mediatest.WebPWithLocation(4, 4, 6, 64), 12, inWebP},
		{"video/mp4", mediatest.MP4WithLocation(false, true, true, 64, 0), -1, inMP4},
		{"video/quicktime", mediatest.MP4WithLocation(true, false, false, 64, 32), -1, inMP4},
		{"video/mp4", mediatest.MP4WithXMP(false), -1, inMP4},
		{"video/quicktime", mediatest.MP4WithXMP(true), -1, inMP4},
		{"image/gif", gif, 13 + 3<<(gif[10]&7+1)*int(gif[10]>>7), inGIF},
		{"image/heic", mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 64, SplitExif: true, SplitBackwards: true}, 6), 0, nil},
		{"image/avif", mediatest.HEIFWithLocation(mediatest.HEIFLayout{Brand: "avif", Pad: 64, ExifInIdat: true}, 6), 0, nil},
		{"video/webm", mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 64, TagsFirst: true, CRC: true}), 0, nil},
		{"video/webm", recorded, bytes.Index(recorded, []byte("\x1F\x43\xB6\x75")) + 15, inWebM}, // in the Cluster, after its Timecode
		{"video/webm", unsized, bytes.Index(unsized, []byte("\x1F\x43\xB6\x75")) + 15, inWebM},
	}
	for i := range files {
		if files[i].at < 0 { // after the first box (ftyp)
			files[i].at = int(binary.BigEndian.Uint32(files[i].bytes))
		}
	}
	return files
}

// FuzzStripLeavesNoPlantedLocationWhateverSurroundsIt: a file with a
// location, with a segment, chunk, box or extension of any kind and
// content put among its own (where its format allows one) and any bytes
// appended, comes out of Strip without the location: outside what the
// fuzzer added, no planted position is left.
func FuzzStripLeavesNoPlantedLocationWhateverSurroundsIt(f *testing.F) {
	files := locatedFiles()
	for i, l := range files {
		if !slices.ContainsFunc(plantedLocations, func(p []byte) bool { return bytes.Contains(l.bytes, p) }) {
			f.Fatalf("file %d (%s) carries no planted location", i, l.ctype)
		}
		f.Add(uint8(i), byte(0), []byte{}, []byte{})
	}
	f.Add(uint8(0), byte(1), []byte("Exif\x00\x00II*\x00"), []byte{})
	f.Add(uint8(1), byte(1), []byte("http://ns.adobe.com/xmp/extension/\x00"), []byte("\xFF\xD8\xFF"))
	f.Add(uint8(5), byte(7), []byte{}, []byte("\x00\x00\x00\x08ftyp"))
	f.Add(uint8(9), byte(2), []byte("\x00\x00\x00\x10udta\x00\x00\x00\x08\xa9xyz"), []byte("\x00\x00\x00\x00moov"))
	f.Add(uint8(13), byte(0xFF), []byte("\x0bXMP DataXMP"), []byte{0x3B})
	f.Fuzz(func(t *testing.T, which, kind byte, data, tail []byte) {
		l := files[int(which)%len(files)]
		var unit []byte
		if l.unit != nil {
			unit = l.unit(kind, data)
		}
		file := bytes.Join([][]byte{l.bytes[:l.at], unit, l.bytes[l.at:], tail}, nil)
		got, err := io.ReadAll(media.Strip(bytes.NewReader(file), l.ctype))
		if err != nil || len(got) != len(file) {
			t.Fatalf("%s: %d bytes became %d: %v", l.ctype, len(file), len(got), err)
		}
		// What the fuzzer added may say anything: it is not looked at.
		clear(got[l.at : l.at+len(unit)])
		clear(got[len(got)-len(tail):])
		for _, p := range plantedLocations {
			if i := bytes.Index(got, p); i >= 0 {
				t.Fatalf("%s (file %d): the location %q survived at %d of %d", l.ctype, int(which)%len(files), p, i, len(got))
			}
		}
	})
}
