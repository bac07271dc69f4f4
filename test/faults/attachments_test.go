package faults_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// attachClient is a client of user whose HTTP goes through httpURL.
func attachClient(t *testing.T, mqttAddr, httpURL string, user int64, log io.Writer) *client.Client {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Brokers: []string{"mqtt://" + mqttAddr}, UserID: user, Token: testnode.Token(t, user),
		HTTPURL: httpURL, MaxReconnectDelay: 300 * time.Millisecond, RequestTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = c.Close(cctx)
	})
	if err := c.AwaitConnection(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestWeakNetworkDownloadCutAtHalfResumesWithRange: a 1 MiB voice note
// downloaded through toxiproxy at 256 kbit/s; the connection is cut after
// half the file, and the client resumes with a Range request from where
// it stopped. The bytes match, and no more than the file crossed the link
// twice over: nothing was downloaded from the start again.
func TestWeakNetworkDownloadCutAtHalfResumesWithRange(t *testing.T) {
	t.Parallel() // waits on toxiproxy, not the CPU: see the package comment
	srv := startNode(t, pgtest.NewDB(t), nil)
	g := mustGroup(t, srv.Service, "voice", []int64{2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sender := attachClient(t, srv.MQTTAddr(), "http://"+srv.HTTPAddr(), 1, nil)
	voice := mediatest.WAV(65536) // 1 MiB and 44 bytes
	a, err := sender.Upload(ctx, g.ID, "voice.wav", bytes.NewReader(voice))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sender.SendMessage(ctx, g.ID, "", client.SendOptions{Attachments: []client.AttachmentRef{a.Ref()}}); err != nil {
		t.Fatal(err)
	}

	counted := countingForwarder(t, srv.HTTPAddr())
	l := newLink(t, "attach-download", counted.addr)
	l.add("slow", "bandwidth", "downstream", `{"rate":32}`) // KB/s: 256 kbit/s
	l.add("cut", "limit_data", "downstream", fmt.Sprintf(`{"bytes":%d}`, len(voice)/2))
	var logs logtest.Buffer
	reader := attachClient(t, srv.MQTTAddr(), "http://"+l.addr(), 2, &logs)
	var got bytes.Buffer
	liftAfter(t, l, "cut", &logs, "download interrupted")
	start := time.Now()
	info, err := reader.Download(ctx, a.ID, &got)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if sha(got.Bytes()) != a.SHA256 || int64(got.Len()) != a.Size || info.Size != a.Size {
		t.Fatalf("downloaded %d bytes (sha %s), want %d (%s)", got.Len(), sha(got.Bytes()), a.Size, a.SHA256)
	}
	if !strings.Contains(logs.String(), "download interrupted; resuming") {
		t.Fatalf("the download was not cut and resumed:\n%s", logs.String())
	}
	var at int64
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "resuming") {
			_, _ = fmt.Sscanf(line[strings.Index(line, " at=")+1:], "at=%d", &at)
		}
	}
	if at < int64(len(voice))/3 || at > int64(len(voice))*6/10 {
		t.Fatalf("resumed at byte %d of %d, want about half", at, len(voice))
	}
	// Resumed, not started over: about the file's bytes crossed the link.
	if sent := counted.down.Load(); sent > int64(len(voice))*12/10 {
		t.Fatalf("chatd sent %d bytes for a file of %d: the download started over", sent, len(voice))
	}
	t.Logf("1 MiB at 256 kbit/s, cut at byte %d and resumed with Range: %v, %d bytes from chatd", at, took.Round(time.Millisecond), counted.down.Load())
}

// forwarder is a TCP relay to chatd counting what chatd sends.
type forwarder struct {
	addr string
	down atomic.Int64
}

func countingForwarder(t *testing.T, upstream string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &forwarder{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				n, _ := io.Copy(c, u)
				f.down.Add(n)
			}()
		}
	}()
	return f
}

// liftAfter removes a link's toxic once the client logged what, so the
// connection the toxic cut is cut and the next one gets through (the
// client waits a backoff of at least 125 ms before it tries again).
func liftAfter(t *testing.T, l *link, toxic string, logs *logtest.Buffer, what string) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for !strings.Contains(logs.String(), what) {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
		if err := l.proxy.Toxics.RemoveToxic(context.Background(), toxic); err != nil {
			t.Errorf("remove toxic %s: %v", toxic, err)
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
}

// TestWeakNetworkUploadCutAtHalfIsSentAgainAndTheMessageOnce: the PUT of
// a photo through toxiproxy at 256 kbit/s is cut after half its bytes;
// the client sends it again from the start, then sends the message, which
// is stored once, with the one attachment, and nothing of the cut attempt
// is left on disk.
func TestWeakNetworkUploadCutAtHalfIsSentAgainAndTheMessageOnce(t *testing.T) {
	t.Parallel() // waits on toxiproxy, not the CPU: see the package comment
	srv := startNode(t, pgtest.NewDB(t), nil)
	g := mustGroup(t, srv.Service, "photos", []int64{2})
	photo := make([]byte, 256<<10)
	copy(photo, mediatest.JPEG(64, 64))
	_, _ = rand.Read(photo[len(mediatest.JPEG(64, 64)):]) // trailing bytes decoders ignore
	l := newLink(t, "attach-upload", srv.HTTPAddr())
	l.add("slow", "bandwidth", "upstream", `{"rate":32}`)
	l.add("cut", "limit_data", "upstream", fmt.Sprintf(`{"bytes":%d}`, len(photo)/2))
	var logs logtest.Buffer
	c := attachClient(t, srv.MQTTAddr(), "http://"+l.addr(), 1, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	liftAfter(t, l, "cut", &logs, "upload interrupted")
	a, err := c.Upload(ctx, g.ID, "photo.jpg", bytes.NewReader(photo))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "upload interrupted; sending it again") {
		t.Fatalf("the upload was not cut:\n%s", logs.String())
	}
	id := newID()
	for i := 0; i < 2; i++ { // a resend of the same message is the same message
		if _, err := c.SendMessage(ctx, g.ID, "", client.SendOptions{ClientMsgID: id, Attachments: []client.AttachmentRef{a.Ref()}}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := pgtest.QueryOne[int](t, srv.Pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, g.ID)
	attached := pgtest.QueryOne[int](t, srv.Pool, `SELECT count(*) FROM attachment WHERE state = 'attached'`)
	if msgs != 1 || attached != 1 {
		t.Fatalf("%d messages, %d attachments: want the message once", msgs, attached)
	}
	files := localBlobs(t, srv.Settings.DataDir)
	if len(files) != 2 || tmpFiles(t, srv.Settings.DataDir) != 0 { // the photo and its thumbnail
		t.Fatalf("blob files after the cut upload: %v", files)
	}
}

func localBlobs(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	root := server.BlobDir(dataDir)
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(p, filepath.Join(root, "tmp")) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

func tmpFiles(t *testing.T, dataDir string) int {
	ents, _ := os.ReadDir(filepath.Join(server.BlobDir(dataDir), "tmp"))
	return len(ents)
}

// httpCall is one authenticated JSON call to a chatd subprocess.
func httpCall(t *testing.T, base string, user int64, method, path string, body io.Reader, length int64) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testnode.Token(t, user))
	if length >= 0 {
		req.ContentLength = length
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func newTicket(t *testing.T, base string, user, conv int64, name, ctype string, size int) chat.UploadTicket {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"conversationId": conv, "name": name, "contentType": ctype, "size": size})
	code, body := httpCall(t, base, user, "POST", "/v1/uploads", bytes.NewReader(b), -1)
	if code != http.StatusCreated {
		t.Fatalf("upload.create: %d %s", code, body)
	}
	var tk chat.UploadTicket
	_ = json.Unmarshal(body, &tk)
	return tk
}

// TestChatdMemoryDoesNotGrowWithTheUploadSize measures chatd's resident
// memory (VmRSS of the subprocess) while it receives a 1 MiB and then a
// 25 MiB upload: the bytes stream to disk, so the peak grows by what a
// request costs, not by the file.
func TestChatdMemoryDoesNotGrowWithTheUploadSize(t *testing.T) {
	url := pgtest.NewDB(t)
	p := newProc(t, url, nil)
	p.start()
	pool := openPool(t, url, 2)
	conv := mustGroup(t, newService(pool), "big", []int64{2})
	peakDuring := func(size int) (before, peak int64) {
		// A voice note the size asked: no image decoding, just bytes.
		data := mediatest.WAV((size - 44) / 16)
		tk := newTicket(t, p.HTTP, 1, conv.ID, "long.wav", "audio/wav", len(data))
		before = p.rssBytes()
		peakRSS := p.samplePeakRSS(5 * time.Millisecond)
		code, body := httpCall(t, p.HTTP, 1, "PUT", tk.URL, &slowReader{r: bytes.NewReader(data), chunk: 256 << 10}, int64(len(data)))
		peak = peakRSS()
		if code != http.StatusOK {
			t.Fatalf("PUT %d bytes: %d %s", len(data), code, body)
		}
		return before, peak
	}
	b1, p1 := peakDuring(1 << 20)
	b25, p25 := peakDuring(25 << 20)
	t.Logf("RSS during a 1 MiB upload: %s -> peak %s (+%s); during a 25 MiB upload: %s -> peak %s (+%s)",
		mib(b1), mib(p1), mib(p1-b1), mib(b25), mib(p25), mib(p25-b25))
	if grow := p25 - b25; grow > 8<<20 {
		t.Fatalf("chatd's RSS grew by %s during a 25 MiB upload: the file is held in memory", mib(grow))
	}
}

// slowReader hands out chunk bytes at a time with a short pause, so the
// upload lasts long enough for RSS to be sampled.
type slowReader struct {
	r     io.Reader
	chunk int
	n     int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n > 0 && s.n%s.chunk == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	if len(p) > s.chunk-s.n%s.chunk {
		p = p[:s.chunk-s.n%s.chunk]
	}
	n, err := s.r.Read(p)
	s.n += n
	return n, err
}

// checkNoOrphans: every blob file is an attachment's (or its thumbnail)
// or queued for deletion, and every attachment that should have bytes has
// them.
func checkNoOrphans(t *testing.T, url, dataDir string) {
	t.Helper()
	testnode.CheckAttachmentBlobs(t, openPool(t, url, 2), localBlobs(t, dataDir))
	if n := tmpFiles(t, dataDir); n != 0 {
		t.Errorf("%d temporary files", n)
	}
}

// TestKill9MidUploadLeavesNoOrphanAndTheUploadCanBeSentAgain kills chatd
// while a PUT is half written to its temporary file: after the restart
// nothing of it is left, the upload is pending and a PUT again completes
// it; the uploads never sent expire with their bytes.
func TestKill9MidUploadLeavesNoOrphanAndTheUploadCanBeSentAgain(t *testing.T) {
	url := pgtest.NewDB(t)
	p := newProc(t, url, nil)
	p.start()
	pool := openPool(t, url, 2)
	conv := mustGroup(t, newService(pool), "k", []int64{2})
	dataDir := p.vars["CHAT_DATA_DIR"]
	data := mediatest.WAV(512 << 10) // 8 MiB
	tk := newTicket(t, p.HTTP, 1, conv.ID, "long.wav", "audio/wav", len(data))
	// Half the body, then hold the connection open.
	testnode.HalfPut(t, p.HTTP, tk.URL, 1, data)
	testkit.WaitFor(t, 10*time.Second, "the upload's temporary file", func() bool { return tmpFiles(t, dataDir) == 1 })
	p.kill()
	p.start()
	checkNoOrphans(t, url, dataDir)
	var state string
	if err := pool.QueryRow(context.Background(), `SELECT state FROM attachment WHERE id = $1`, tk.UploadID).Scan(&state); err != nil || state != "pending" {
		t.Fatalf("after kill -9 the upload is %q (%v), want pending", state, err)
	}
	if code, body := httpCall(t, p.HTTP, 1, "PUT", tk.URL, bytes.NewReader(data), int64(len(data))); code != http.StatusOK {
		t.Fatalf("PUT again: %d %s", code, body)
	}
	checkNoOrphans(t, url, dataDir)
	if n := len(localBlobs(t, dataDir)); n != 1 {
		t.Fatalf("%d blobs, want the one upload", n)
	}
}

// TestKill9MidCleanupLeavesNoOrphan: 5,000 uploads expire at once; chatd is
// killed while it deletes their blobs, in the middle of the queue, and
// started again: the queue is worked off, no blob is left of them, and
// the attachment that was sent keeps its bytes.
func TestKill9MidCleanupLeavesNoOrphan(t *testing.T) {
	url := pgtest.NewDB(t)
	pool := openPool(t, url, 4)
	ctx := context.Background()
	conv := mustGroup(t, newService(pool), "k", []int64{2})
	p := newProc(t, url, nil)
	dataDir := p.vars["CHAT_DATA_DIR"]
	root := server.BlobDir(dataDir)
	const n = 5000
	keys := make([]string, n+1)
	ids := make([]string, n+1)
	for i := range keys {
		keys[i], ids[i] = chat.NewBlobKey(), chat.NewUploadID()
		f := filepath.Join(root, filepath.FromSlash(keys[i]))
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("some bytes"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// All but the last were never sent and are three days old; the last
	// was sent (seq 1) a second ago.
	if _, err := pool.Exec(ctx, `INSERT INTO attachment (id, blob_key, uploader_id, conversation_id, name, declared_type,
		declared_size, state, created_at, url_expires_at, completed_at, content_type, size, sha256, seq, position)
		SELECT u.id, u.key, 1, $3, 'f', 'text/plain', 10,
		       CASE WHEN u.i = $4 THEN 'attached' ELSE 'complete' END,
		       now() - CASE WHEN u.i = $4 THEN interval '1 second' ELSE interval '3 days' END,
		       now() - interval '1 second', now(), 'text/plain', 10, 'x',
		       CASE WHEN u.i = $4 THEN 1 END, 1
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(id, key, i)`, ids, keys, conv.ID, n+1); err != nil {
		t.Fatal(err)
	}
	// chatd starts, expires them all and deletes their blobs in batches
	// of 100, each batch a transaction; it is killed in the middle.
	p.start()
	testkit.WaitFor(t, 30*time.Second, "the cleanup to start deleting", func() bool { return len(localBlobs(t, dataDir)) < n })
	p.kill()
	left := len(localBlobs(t, dataDir))
	var queued int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM blob_deletion`).Scan(&queued)
	t.Logf("killed with %d of %d blobs left, %d deletions queued", left, n+1, queued)
	if left <= 1 {
		t.Logf("the cleanup finished before the kill; the restart still checks the rest")
	}
	p.start()
	testkit.WaitFor(t, 30*time.Second, "the cleanup to finish after the restart", func() bool {
		var q int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM blob_deletion`).Scan(&q)
		return q == 0 && len(localBlobs(t, dataDir)) == 1
	})
	checkNoOrphans(t, url, dataDir)
	if got := localBlobs(t, dataDir); len(got) != 1 || got[0] != keys[n] {
		t.Fatalf("blobs left: %v, want the sent attachment's", got)
	}
}
