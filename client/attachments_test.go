package client_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
)

func TestUploadSendAndDownloadAnAttachment(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	api := "http://" + srv.HTTPAddr()
	alice, bob := connectHTTP(t, srv, 1, api), connectHTTP(t, srv, 2, api)
	ctx := ctxFor(t, 30*time.Second)

	photo := mediatest.JPEG(900, 600)
	var progress atomic.Int64
	// A reader that can only be read once: Upload spools it.
	a, err := alice.UploadWithOptions(ctx, g.ID, "dir/photo.jpg", io.MultiReader(bytes.NewReader(photo)),
		client.UploadOptions{Progress: func(sent, _ int64) { progress.Store(sent) }})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "photo.jpg" || a.ContentType != "image/jpeg" || a.Width != 900 || a.Thumbnail == nil || progress.Load() != int64(len(photo)) {
		t.Fatalf("upload: %+v, progress %d", a, progress.Load())
	}
	seq, err := alice.SendMessage(ctx, g.ID, "", client.SendOptions{Attachments: []client.AttachmentRef{a.Ref()}})
	if err != nil || seq != 1 {
		t.Fatalf("send: %d %v", seq, err)
	}
	ev := messages(t, bob, g.ID, 1, 15*time.Second)[0]
	if ev.MsgType != "image" || len(ev.Attachments) != 1 || ev.Attachments[0].SHA256 != a.SHA256 {
		t.Fatalf("event: %+v", ev)
	}
	var buf bytes.Buffer
	info, err := bob.Download(ctx, ev.Attachments[0].ID, &buf)
	if err != nil || info.Name != "photo.jpg" || info.Size != a.Size {
		t.Fatalf("download: %+v %v", info, err)
	}
	if sum := sha256.Sum256(buf.Bytes()); hex.EncodeToString(sum[:]) != a.SHA256 {
		t.Fatal("downloaded bytes differ from the announced sha256")
	}
	var thumb bytes.Buffer
	if _, err := bob.DownloadThumbnail(ctx, a.ID, &thumb); err != nil || int64(thumb.Len()) != a.Thumbnail.Size {
		t.Fatalf("thumbnail: %d bytes, %v", thumb.Len(), err)
	}
	// Resuming a partial file: the rest only.
	var rest bytes.Buffer
	if info, err := bob.DownloadFrom(ctx, a.ID, &rest, 1000); err != nil || info.Written != a.Size-1000 || !bytes.Equal(rest.Bytes(), buf.Bytes()[1000:]) {
		t.Fatalf("resume: %+v %v", info, err)
	}
	// Resuming a file already whole: nothing more; one longer than the
	// attachment is not taken for whole.
	if info, err := bob.DownloadFrom(ctx, a.ID, io.Discard, a.Size); err != nil || info.Written != 0 || info.Size != a.Size {
		t.Fatalf("resume at the end: %+v %v, want nothing written of %d bytes", info, err, a.Size)
	}
	if info, err := bob.DownloadFrom(ctx, a.ID, io.Discard, a.Size+10); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("resume past the end of a %d-byte attachment: %+v %v, want an invalid error", a.Size, info, err)
	}
	// A non-member is refused for good.
	eve := connectHTTP(t, srv, 3, api)
	if _, err := eve.Download(ctx, a.ID, io.Discard); !errors.Is(err, client.ErrNotMember) {
		t.Fatalf("non-member download: %v", err)
	}
	// A voice note from a file on disk.
	p := filepath.Join(t.TempDir(), "note.wav")
	if err := os.WriteFile(p, mediatest.WAV(1200), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	v, err := alice.Upload(ctx, g.ID, p, f)
	if err != nil || v.DurationMs != 1200 || v.ContentType != "audio/wav" {
		t.Fatalf("voice note: %+v %v", v, err)
	}
	// A refused file is an *Error with chatd's code.
	if _, err := alice.Upload(ctx, g.ID, "cat.png", bytes.NewReader(mediatest.HTML())); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("HTML as a PNG: %v", err)
	}
}

// TestAnUploadCutByTheNetworkIsSentAgain cuts the first PUT halfway
// (a proxy that drops the connection): Upload sends it again and the
// message is sent once.
func TestAnUploadCutByTheNetworkIsSentAgain(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	lb, puts := firstPutTo(t, srv, func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		// Read half, then drop the connection under the client.
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		dropConnection(w)
	})
	alice := connectHTTP(t, srv, 1, lb.URL)
	ctx := ctxFor(t, 30*time.Second)
	data := mediatest.PNG(300, 300)
	a, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if puts.Load() != 2 {
		t.Fatalf("%d PUTs, want the cut one and its retry", puts.Load())
	}
	if _, err := alice.SendMessage(ctx, g.ID, "again", client.SendOptions{Attachments: []client.AttachmentRef{a.Ref()}}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM message WHERE conversation_id = $1`, g.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d messages, %v", n, err)
	}
}

// TestAnUploadWhoseAnswerWasLostIsReturnedWhenItsFirstReadFails: the
// first PUT stores the file but its answer is lost; the PUT sent again
// (refused for the moment by the API rate limit, which the PUTs used up,
// then sent again) is answered as the first was, chatd comparing the
// bytes with those it stored. The upload is complete: Upload must return
// it rather than a failure.
func TestAnUploadWhoseAnswerWasLostIsReturnedWhenItsFirstReadFails(t *testing.T) {
	t.Parallel()
	// Burst: the connection's catch-up (its inbox read), the ticket and
	// the two PUTs.
	srv := testnode.Start(t, testnode.SecretEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_LIMIT_API_RATE": "2", "CHAT_LIMIT_API_BURST": "4"}), nil)
	g := groupOf12(t, srv)
	// chatd stores the first PUT; its answer never reaches the client.
	lb, _, puts := storedThenLost(t, srv, func(string) {})
	alice := connectHTTP(t, srv, 1, lb.URL)
	ctx := ctxFor(t, 30*time.Second)
	a, err := alice.Upload(ctx, g.ID, "p.png", bytes.NewReader(mediatest.PNG(64, 64)))
	if err != nil {
		t.Fatalf("Upload of a stored file: %v", err)
	}
	if puts.Load() != 2 {
		t.Fatalf("%d PUTs, want the one whose answer was lost and its retry", puts.Load())
	}
	sendUpload(t, ctx, alice, g.ID, a, "send the upload")
}

// TestAPhotoIsDeclaredAsChatdNamesItWhateverTheSystemsMimeTables: a
// photo named x.heic is declared image/heic from the client's own table,
// not from Go's mime package, which knows .heic only through the system's
// tables (without them: application/octet-stream, refused 415; with a
// shared MIME database: image/heif). A file whose name does not tell its
// type (no extension, or .bin, which the system's tables may name
// application/octet-stream) is declared by its first bytes as chatd's own
// sniffer names them, so chatd accepts it: a HEIC by its ftyp brands (Go's
// sniffer knows none), a HEIF, an AVIF, a 7z archive.
func TestAPhotoIsDeclaredAsChatdNamesItWhateverTheSystemsMimeTables(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	alice := connectHTTP(t, srv, 1, "http://"+srv.HTTPAddr())
	ctx := ctxFor(t, 30*time.Second)
	heif := func(brand string) []byte {
		return mediatest.HEIFWithLocation(mediatest.HEIFLayout{Brand: brand, Pad: 4000}, 1)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"x.heic", heif("heic"), "image/heic"},
		{"IMG_0001.HEIF", heif("mif1"), "image/heif"},
		{"x.avif", heif("avif"), "image/avif"},
		{"IMG_0001", heif("heic"), "image/heic"},
		{"scan.bin", heif("mif1"), "image/heif"},
		{"photo", heif("avif"), "image/avif"},
		{"archive", append([]byte("7z\xBC\xAF\x27\x1C\x00\x04"), make([]byte, 200)...), "application/x-7z-compressed"},
	} {
		a, err := alice.Upload(ctx, g.ID, c.name, bytes.NewReader(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if a.ContentType != c.want {
			t.Fatalf("%s: stored as %q, want %q", c.name, a.ContentType, c.want)
		}
		sendUpload(t, ctx, alice, g.ID, a, c.name+": send")
	}
}
