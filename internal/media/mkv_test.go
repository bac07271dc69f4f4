package media_test

import (
	"bytes"
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
// Cluster, in a Segment of unknown size too, however the file is read and
// wherever it is cut; its duration reads as before. Tags over 256 KiB
// are a Void whole.
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
