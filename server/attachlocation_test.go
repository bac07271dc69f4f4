package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestLocationIsStrippedWhereverItIsInThePhoto: a photo's location is
// removed wherever the file keeps it, not only in its first 256 KiB: a
// JPEG whose EXIF and XMP follow large ICC profile segments, or with a
// second picture (a phone's Multi-Picture preview) appended after its
// end; a PNG whose eXIf and XMP come after the image data (where
// ExifTool writes them); a WebP, whose EXIF and XMP chunks the format
// puts after the image data. Members download the photo without its GPS
// position, of the announced size and sha256.
func TestLocationIsStrippedWhereverItIsInThePhoto(t *testing.T) {
	t.Parallel()
	photos := []struct {
		name, ctype string
		data        []byte
	}{
		{"late.jpg", "image/jpeg", mediatest.JPEGWithLocationAfter(400, 300, 6, 300<<10)},
		{"small-mpf.jpg", "image/jpeg", mediatest.JPEGWithLocationAfter(400, 300, 6, 0)},
		{"late.png", "image/png", mediatest.PNGWithLocationAfterIDAT(300, 300, 6)},
		{"small.png", "image/png", mediatest.PNGWithLocationAfterIDAT(20, 20, 6)},
		{"late.webp", "image/webp", mediatest.WebPWithLocation(400, 300, 6, 300<<10)},
	}
	stores(t, nil, func(t *testing.T, n attachNode) {
		g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
		for _, p := range photos {
			if !bytes.Contains(p.data, mediatest.Latitude) || !bytes.Contains(p.data, mediatest.XMPLatitude) {
				t.Fatalf("%s: the test photo has no location", p.name)
			}
			up, got := n.sendAndDownload(t, g.ID, p.name, p.ctype, p.data)
			if bytes.Contains(got.body, mediatest.Latitude) {
				t.Errorf("%s (%d bytes): a member downloaded the EXIF GPS position", p.name, len(p.data))
			}
			if bytes.Contains(got.body, mediatest.XMPLatitude) {
				t.Errorf("%s (%d bytes): a member downloaded the XMP GPS position", p.name, len(p.data))
			}
			if len(got.body) != len(p.data) || hexSHA(got.body) != up.Attachment.SHA256 {
				t.Errorf("%s: downloaded %d bytes of sha256 %s; announced %d bytes of %s", p.name,
					len(got.body), hexSHA(got.body), up.Attachment.Size, up.Attachment.SHA256)
			}
		}
	})
}

// TestAVideosRecordingLocationIsStripped: a phone's video keeps where it
// was recorded in its moov (udta/©xyz, a track's ©xyz, 3GPP loci, Apple's
// meta keyed com.apple.quicktime.location), before or after the media
// data, and a WebM or Matroska file remuxed from one by ffmpeg in its Tags
// (LOCATION, COM.APPLE.QUICKTIME.LOCATION.ISO6709, ...), after a Cluster of
// unknown size too (as a recorder writes it); members download
// it without, of the announced size and sha256, and its duration is still
// read.
func TestAVideosRecordingLocationIsStripped(t *testing.T) {
	t.Parallel()
	videos := []struct {
		name, ctype string
		data        []byte
	}{
		{"iphone.mov", "video/quicktime", mediatest.MP4WithLocation(true, false, false, 400<<10, 0)},
		{"android.mp4", "video/mp4", mediatest.MP4WithLocation(false, true, true, 400<<10, 0)},
		{"remuxed.webm", "video/webm", mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 400 << 10})},
		{"remuxed.mkv", "video/x-matroska", mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 4 << 10, TagsFirst: true, CRC: true})},
		{"recorded.webm", "video/webm", mediatest.WebMWithLocation(mediatest.WebMLayout{Pad: 400 << 10, UnknownSegment: true, UnknownCluster: true})},
	}
	stores(t, nil, func(t *testing.T, n attachNode) {
		g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
		for _, v := range videos {
			up, got := n.sendAndDownload(t, g.ID, v.name, v.ctype, v.data)
			if bytes.Contains(got.body, mediatest.VideoLocation) || bytes.Contains(got.body, mediatest.LociName) ||
				bytes.Contains(got.body, []byte("com.apple.quicktime.location")) {
				t.Errorf("%s: a member downloaded where the video was recorded", v.name)
			}
			if len(got.body) != len(v.data) || hexSHA(got.body) != up.Attachment.SHA256 {
				t.Errorf("%s: downloaded %d bytes of sha256 %s; announced %d bytes of %s", v.name,
					len(got.body), hexSHA(got.body), up.Attachment.Size, up.Attachment.SHA256)
			}
			if up.Attachment.DurationMs != 2500 {
				t.Errorf("%s: duration %d ms, want 2500", v.name, up.Attachment.DurationMs)
			}
		}
	})
}

// TestALocationHiddenWhereReadersStillFindItIsStrippedToo: a photo's
// or a video's location kept where a stripper looking at the usual
// places alone would miss it, but ExifTool and other readers find it,
// is not downloaded by members either: GPS directories reached through a
// second GPSInfo pointer, IFD1, the Exif IFD or a SubIFD; an extended
// XMP packet whose parts come out of order; a motion photo's appended
// video; a video's XMP packet (an MP4's uuid box, a MOV's udta/XMP_).
func TestALocationHiddenWhereReadersStillFindItIsStrippedToo(t *testing.T) {
	t.Parallel()
	files := []struct {
		name, ctype string
		data        []byte
	}{
		{"hidden.jpg", "image/jpeg", mediatest.JPEGWithHiddenLocation(400, 300)},
		{"edited.mp4", "video/mp4", mediatest.MP4WithXMP(false)},
		{"edited.mov", "video/quicktime", mediatest.MP4WithXMP(true)},
	}
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	for _, f := range files {
		up, got := n.sendAndDownload(t, g.ID, f.name, f.ctype, f.data)
		for _, where := range [][]byte{mediatest.Latitude, mediatest.XMPLatitude, []byte(`"52,31.2N"`), mediatest.VideoLocation, mediatest.LociName} {
			if bytes.Contains(got.body, where) {
				t.Errorf("%s: a member downloaded %q", f.name, where)
			}
		}
		if len(got.body) != len(f.data) || hexSHA(got.body) != up.Attachment.SHA256 {
			t.Errorf("%s: downloaded %d bytes of sha256 %s; announced %d bytes of %s", f.name,
				len(got.body), hexSHA(got.body), up.Attachment.Size, up.Attachment.SHA256)
		}
	}
}

// TestAWebPPhotoTurnedByItsEXIFIsMeasuredAsShownWhateverItsSize: a
// WebP keeps its EXIF, orientation included, after the image data, as
// the format puts it; a photo turned a quarter (orientation 6, 400 × 300
// stored) is 300 × 400 as shown, however many bytes of image data come
// before its EXIF, not only when they fit in the first 256 KiB.
func TestAWebPPhotoTurnedByItsEXIFIsMeasuredAsShownWhateverItsSize(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	for _, pad := range []int{1 << 10, 300 << 10} {
		up := n.upload(t, 1, g.ID, "turned.webp", "image/webp", mediatest.WebPWithLocation(400, 300, 6, pad))
		if a := up.Attachment; a.Width != 300 || a.Height != 400 {
			t.Errorf("after %d KiB of image data: %d × %d, want 300 × 400 as shown", pad>>10, a.Width, a.Height)
		}
	}
}

// sendAndDownload uploads data as user 1, sends it into conv and returns
// the upload and what user 2 downloads of it.
func (n attachNode) sendAndDownload(t *testing.T, conv int64, name, ctype string, data []byte) (chat.Upload, httpReply) {
	t.Helper()
	up := n.upload(t, 1, conv, name, ctype, data)
	if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", conv),
		map[string]any{"clientMsgId": newID(), "attachments": []chat.AttachmentRef{{UploadID: up.UploadID}}}, nil); r.status != http.StatusCreated {
		t.Fatalf("%s: send: %d %s", name, r.status, r.body)
	}
	got := n.fetch(t, 2, "/v1/attachments/"+up.UploadID, nil)
	if got.status != http.StatusOK {
		t.Fatalf("%s: download: %d %s", name, got.status, got.body)
	}
	return up, got
}

// TestAnIPhonesHEICPhotoIsSentWithoutItsLocationAndWithItsSize: a HEIC
// photo, what iPhones take, is accepted under the default upload types as
// the image it is (image/heic, msgType image; chatd does not decode it:
// no thumbnail, downloaded as an attachment) with the size its container
// gives it as shown (ispe, turned by irot: an upright portrait shot of a
// 4032 × 3024 sensor is 3024 × 4032) in the upload, the message and
// history, and members download it without the GPS position of its Exif
// item or its XMP, of the announced size and sha256; an AVIF too.
func TestAnIPhonesHEICPhotoIsSentWithoutItsLocationAndWithItsSize(t *testing.T) {
	t.Parallel()
	photos := []struct {
		name, ctype   string
		data          []byte
		width, height int
	}{
		{"IMG_0001.HEIC", "image/heic", mediatest.HEIFWithLocation(mediatest.HEIFLayout{Pad: 400 << 10, Width: 4032, Height: 3024, Rotation: 3}, 6), 3024, 4032},
		{"photo.avif", "image/avif", mediatest.HEIFWithLocation(mediatest.HEIFLayout{Brand: "avif", Pad: 4 << 10, ExifInIdat: true, Width: 1920, Height: 1080}, 1), 1920, 1080},
	}
	stores(t, nil, func(t *testing.T, n attachNode) {
		g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
		for _, p := range photos {
			up := n.upload(t, 1, g.ID, p.name, p.ctype, p.data)
			if a := up.Attachment; a.ContentType != p.ctype || a.Thumbnail != nil || a.Width != p.width || a.Height != p.height {
				t.Errorf("%s: attachment %+v; want %s of %d × %d without thumbnail", p.name, a, p.ctype, p.width, p.height)
			}
			r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
				map[string]any{"clientMsgId": newID(), "attachments": []chat.AttachmentRef{{UploadID: up.UploadID}}}, nil)
			if r.status != http.StatusCreated {
				t.Fatalf("%s: send: %d %s", p.name, r.status, r.body)
			}
			m := decode[attachEvent](t, r)
			if m.MsgType != chat.MsgImage || len(m.Attachments) != 1 || m.Attachments[0].Width != p.width || m.Attachments[0].Height != p.height {
				t.Errorf("%s: message %+v; want an image of %d × %d", p.name, m, p.width, p.height)
			}
			h := n.call(t, 2, "GET", fmt.Sprintf("/v1/conversations/%d/messages?afterSeq=%d", g.ID, m.Seq-1), nil, nil)
			var page struct{ Messages []attachEvent }
			if err := json.Unmarshal(h.body, &page); err != nil || len(page.Messages) != 1 ||
				page.Messages[0].Attachments[0].Width != p.width || page.Messages[0].Attachments[0].Height != p.height {
				t.Errorf("%s: history %d %s; want the image's size", p.name, h.status, h.body)
			}
			got := n.fetch(t, 2, "/v1/attachments/"+up.UploadID, nil)
			if got.status != http.StatusOK {
				t.Fatalf("%s: download: %d %s", p.name, got.status, got.body)
			}
			if bytes.Contains(got.body, mediatest.Latitude) || bytes.Contains(got.body, mediatest.XMPLatitude) {
				t.Errorf("%s: a member downloaded the GPS position", p.name)
			}
			if len(got.body) != len(p.data) || hexSHA(got.body) != up.Attachment.SHA256 {
				t.Errorf("%s: downloaded %d bytes of sha256 %s; announced %d bytes of %s", p.name,
					len(got.body), hexSHA(got.body), up.Attachment.Size, up.Attachment.SHA256)
			}
		}
	})
}
