package media_test

import (
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestStripVoidsAWebMsLocationTagsAndKeepsEveryOtherByte: a WebM or
// Matroska file remuxed by ffmpeg from a phone's video carries where it
// was recorded in its Tags (LOCATION, location-eng, a GPS SimpleTag nested
// in another, COM.APPLE.QUICKTIME.LOCATION.ISO6709): those SimpleTags
// become Void elements of their size (a Tag left with none, too), the
// CRC-32s over them are computed again, and every other byte stays
// (the encoder, the track's DURATION, the comment), before or after the
// Cluster, in a Segment of unknown size too, after a Cluster of unknown
// size (a recorder's, whose end is where the Tags start), in Tags of
// unknown size, however the file is read and wherever it is cut; its
// duration reads as before. Tags over 256 KiB are a Void whole.
func TestStripVoidsAWebMsLocationTagsAndKeepsEveryOtherByte(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ctype  string
		layout mediatest.WebMLayout
	}{
		{"ffmpeg's WebM, Tags last", "video/webm", mediatest.WebMLayout{Pad: 300 << 10}},
		{"Matroska, Tags first, CRC-32s", "video/x-matroska", mediatest.WebMLayout{Pad: 4 << 10, TagsFirst: true, CRC: true}},
		{"audio WebM, a Segment of unknown size", "audio/webm", mediatest.WebMLayout{Pad: 4 << 10, UnknownSegment: true, CRC: true}},
		{"Tags with a small cover", "video/webm", mediatest.WebMLayout{Pad: 4 << 10, CoverPad: 100 << 10}},
		{"Tags over 256 KiB", "video/webm", mediatest.WebMLayout{Pad: 4 << 10, CoverPad: 300 << 10, CRC: true}},
		{"a recorder's WebM, Tags after a Cluster of unknown size", "video/webm", mediatest.WebMLayout{Pad: 4 << 10, UnknownSegment: true, UnknownCluster: true}},
		{"Tags after a Cluster of unknown size in a Segment of known size", "video/x-matroska", mediatest.WebMLayout{Pad: 4 << 10, UnknownCluster: true, CRC: true}},
		{"Tags of unknown size, after a Cluster of unknown size", "video/webm", mediatest.WebMLayout{Pad: 4 << 10, UnknownSegment: true, UnknownCluster: true, UnknownTags: true, CRC: true}},
		{"Tags of unknown size, before the Cluster", "video/x-matroska", mediatest.WebMLayout{Pad: 4 << 10, UnknownSegment: true, UnknownTags: true, TagsFirst: true}},
		{"Tags, Tag and SimpleTags of unknown size", "video/webm", mediatest.WebMLayout{Pad: 4 << 10, UnknownSegment: true, UnknownCluster: true, UnknownTags: true, UnknownTag: true}},
		{"Tags, Tag and SimpleTags of unknown size, before the Cluster", "video/webm", mediatest.WebMLayout{Pad: 4 << 10, UnknownSegment: true, UnknownTags: true, UnknownTag: true, TagsFirst: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := mediatest.WebMWithLocation(tc.layout)
			if !bytes.Contains(file, mediatest.VideoLocation) {
				t.Fatal("the test video has no location")
			}
			as := tc.layout
			as.Stripped = true
			want := mediatest.WebMWithLocation(as)
			got := strippedTo(t, file, tc.ctype, want)
			if bytes.Contains(got, mediatest.VideoLocation) {
				t.Fatal("the location is still there")
			}
			if tc.layout.CoverPad < 256<<10 {
				for _, kept := range []string{"ENCODER", "Lavf61.7.100", "00:00:02.500000000", "a day out"} {
					if !bytes.Contains(got, []byte(kept)) {
						t.Errorf("%q went", kept)
					}
				}
			}
			if d := media.Duration(bytes.NewReader(got), int64(len(got)), tc.ctype); d != 2500 {
				t.Errorf("duration %d ms, want 2500", d)
			}
		})
	}
}

// TestAWebMOfManyTinyElementsCostsAWalkOfItsBytes: a Cluster of unknown
// size is walked element by element to the Tags after it; a file of 4 MiB
// of elements of a few bytes each (empty blocks, BlockGroups of unknown
// size entered, empty Tags held and stripped) is walked a read buffer at
// a time: its location is gone, it comes out in reads of KiBs, not one a
// element, and stripping it holds no more than a read buffer and a Tags.
func TestAWebMOfManyTinyElementsCostsAWalkOfItsBytes(t *testing.T) {
	layout := mediatest.WebMLayout{Pad: 64, UnknownSegment: true, UnknownCluster: true, Tiny: 4 << 20}
	file := mediatest.WebMWithLocation(layout)
	layout.Stripped = true
	strippedTo(t, file, "video/webm", mediatest.WebMWithLocation(layout))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := &readsCounted{r: media.Strip(bytes.NewReader(file), "video/webm")}
	n, err := io.Copy(io.Discard, r)
	runtime.ReadMemStats(&after)
	if err != nil || n != int64(len(file)) {
		t.Fatalf("%d bytes became %d: %v", len(file), n, err)
	}
	if r.reads > len(file)>>10 {
		t.Errorf("%d KiB came out in %d reads", len(file)>>10, r.reads)
	}
	if took := after.TotalAlloc - before.TotalAlloc; took > 1<<20 {
		t.Errorf("stripping %d KiB allocated %d KiB", len(file)>>10, took>>10)
	}
}

// readsCounted counts the reads of a stream: each is a write of what
// reads it (to the blob store).
type readsCounted struct {
	r     io.Reader
	reads int
}

func (c *readsCounted) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}
