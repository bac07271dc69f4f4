package blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/internal/blob/s3fake"
)

// store is one implementation under the contract, with what the direct
// (presigned) part of the contract needs of its server.
type store struct {
	chat.BlobStore
	fake *s3fake.Server // nil for local disk
}

func newLocal(t *testing.T) store {
	l, err := blob.NewLocal(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return store{BlobStore: l}
}

func newS3(t *testing.T) store {
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	s, err := blob.NewS3(context.Background(), fake.Config(nil))
	if err != nil {
		t.Fatal(err)
	}
	return store{BlobStore: s, fake: fake}
}

func TestLocalDiskPassesTheBlobStoreContract(t *testing.T) { contract(t, newLocal) }

func TestS3PassesTheBlobStoreContract(t *testing.T) { contract(t, newS3) }

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(t *testing.T, s chat.BlobStore, key string) []byte {
	t.Helper()
	r, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

func keys(t *testing.T, s chat.BlobStore) []string {
	t.Helper()
	var out []string
	if err := s.List(context.Background(), func(k string) error { out = append(out, k); return nil }); err != nil {
		t.Fatalf("list: %v", err)
	}
	return out
}

// contract is the one suite every chat.BlobStore passes.
func contract(t *testing.T, open func(t *testing.T) store) {
	ctx := context.Background()

	t.Run("a blob reads back byte for byte, sequentially and at offsets", func(t *testing.T) {
		s := open(t)
		data := randomBytes(t, 300<<10+17)
		key := blob.NewKey()
		if err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data)), "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, key); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, differ from the %d written", len(got), len(data))
		}
		info, err := s.Stat(ctx, key)
		if err != nil || info.Size != int64(len(data)) || info.ModTime.IsZero() {
			t.Fatalf("stat: %+v %v", info, err)
		}
		r, err := s.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		part := make([]byte, 1000)
		if _, err := r.ReadAt(part, 150<<10); err != nil || !bytes.Equal(part, data[150<<10:150<<10+1000]) {
			t.Fatalf("ReadAt: %v", err)
		}
		if _, err := r.Seek(-100, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		tail, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(tail, data[len(data)-100:]) {
			t.Fatalf("read after Seek: %d bytes, %v", len(tail), err)
		}
	})

	t.Run("a put with fewer or more bytes than declared stores nothing", func(t *testing.T) {
		s := open(t)
		data := randomBytes(t, 64<<10)
		short, long := blob.NewKey(), blob.NewKey()
		if err := s.Put(ctx, short, bytes.NewReader(data[:1000]), int64(len(data)), ""); !errors.Is(err, chat.ErrBlobSize) {
			t.Fatalf("short put: %v, want ErrBlobSize", err)
		}
		if err := s.Put(ctx, long, bytes.NewReader(data), int64(len(data)-1), ""); !errors.Is(err, chat.ErrBlobSize) {
			t.Fatalf("long put: %v, want ErrBlobSize", err)
		}
		for _, k := range []string{short, long} {
			if _, err := s.Stat(ctx, k); !errors.Is(err, chat.ErrBlobNotFound) {
				t.Errorf("%s after a refused put: %v, want ErrBlobNotFound", k, err)
			}
		}
		if ks := keys(t, s); len(ks) != 0 {
			t.Errorf("refused puts left %v", ks)
		}
	})

	t.Run("a put whose context ends stores nothing", func(t *testing.T) {
		s := open(t)
		key := blob.NewKey()
		cctx, cancel := context.WithCancel(ctx)
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write(randomBytes(t, 10<<10))
			cancel()
			time.Sleep(50 * time.Millisecond)
			_ = pw.CloseWithError(context.Canceled)
		}()
		if err := s.Put(cctx, key, pr, 1<<20, ""); err == nil {
			t.Fatal("put of a cancelled upload succeeded")
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, chat.ErrBlobNotFound) {
			t.Fatalf("after a cancelled put: %v", err)
		}
	})

	t.Run("writing a key again replaces the blob whole", func(t *testing.T) {
		s := open(t)
		key := blob.NewKey()
		for _, d := range [][]byte{randomBytes(t, 5000), randomBytes(t, 70)} {
			if err := s.Put(ctx, key, bytes.NewReader(d), int64(len(d)), ""); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, s, key); !bytes.Equal(got, d) {
				t.Fatal("second put did not replace the first")
			}
		}
	})

	t.Run("unknown keys are not found and deleting is idempotent", func(t *testing.T) {
		s := open(t)
		key := blob.NewKey()
		if _, err := s.Open(ctx, key); !errors.Is(err, chat.ErrBlobNotFound) {
			t.Fatalf("open unknown: %v", err)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, chat.ErrBlobNotFound) {
			t.Fatalf("stat unknown: %v", err)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Fatalf("delete unknown: %v", err)
		}
		if err := s.Put(ctx, key, strings.NewReader("x"), 1, "text/plain"); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := s.Delete(ctx, key); err != nil {
				t.Fatalf("delete #%d: %v", i+1, err)
			}
		}
		if _, err := s.Open(ctx, key); !errors.Is(err, chat.ErrBlobNotFound) {
			t.Fatalf("open deleted: %v", err)
		}
	})

	t.Run("list names every blob and its thumbnail", func(t *testing.T) {
		s := open(t)
		want := map[string]bool{}
		for i := 0; i < 5; i++ {
			k := blob.NewKey()
			for _, key := range []string{k, chat.ThumbnailKey(k)} {
				if err := s.Put(ctx, key, strings.NewReader("abc"), 3, ""); err != nil {
					t.Fatal(err)
				}
				want[key] = true
			}
		}
		got := keys(t, s)
		if len(got) != len(want) {
			t.Fatalf("listed %d keys, want %d: %v", len(got), len(want), got)
		}
		for _, k := range got {
			if !want[k] {
				t.Errorf("listed %q, never written", k)
			}
		}
	})

	t.Run("keys chatd did not make are refused", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"../../etc/passwd", "ab/../../x", "", "AB/CDEFGHIJKLMNOPQRSTUVWXYZ234567A", "ab/c"} {
			if err := s.Put(ctx, k, strings.NewReader("x"), 1, ""); err == nil {
				t.Errorf("put %q succeeded", k)
			}
			if _, err := s.Open(ctx, k); err == nil || errors.Is(err, chat.ErrBlobNotFound) {
				t.Errorf("open %q: %v, want a key error", k, err)
			}
		}
	})

	t.Run("concurrent puts and reads of many keys", func(t *testing.T) {
		s := open(t)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := randomBytes(t, 1000*(i+1))
				k := blob.NewKey()
				if err := s.Put(ctx, k, bytes.NewReader(d), int64(len(d)), ""); err != nil {
					errs <- err
					return
				}
				r, err := s.Open(ctx, k)
				if err != nil {
					errs <- err
					return
				}
				defer r.Close()
				got, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(got, d) {
					errs <- errors.New("read back differs")
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("presigned URLs move exactly the signed bytes until they expire", func(t *testing.T) {
		s := open(t)
		key := blob.NewKey()
		if !s.Direct() {
			if _, _, err := s.PresignPut(ctx, key, "image/png", 10, time.Minute); !errors.Is(err, chat.ErrNoDirectAccess) {
				t.Fatalf("local PresignPut: %v", err)
			}
			if _, err := s.PresignGet(ctx, key, time.Minute, "", ""); !errors.Is(err, chat.ErrNoDirectAccess) {
				t.Fatalf("local PresignGet: %v", err)
			}
			return
		}
		data := randomBytes(t, 40<<10)
		url, hdr, err := s.PresignPut(ctx, key, "image/png", int64(len(data)), 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		put := func(body []byte, h map[string]string) int {
			req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
			for k, v := range h {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := put(data[:len(data)-1], hdr); code != http.StatusForbidden {
			t.Errorf("PUT of one byte less than signed: %d, want 403", code)
		}
		if code := put(data, map[string]string{"Content-Type": "text/html"}); code != http.StatusForbidden {
			t.Errorf("PUT with another Content-Type than signed: %d, want 403", code)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, chat.ErrBlobNotFound) {
			t.Fatalf("refused PUTs stored something: %v", err)
		}
		if code := put(data, hdr); code != http.StatusOK {
			t.Fatalf("PUT of the signed bytes: %d", code)
		}
		if got := readAll(t, s, key); !bytes.Equal(got, data) {
			t.Fatal("presigned PUT stored other bytes")
		}

		get, err := s.PresignGet(ctx, key, 5*time.Minute, "image/png", `attachment; filename="a.png"`)
		if err != nil {
			t.Fatal(err)
		}
		fetch := func(u string) (int, []byte, http.Header) {
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b, resp.Header
		}
		code, body, h := fetch(get)
		if code != http.StatusOK || !bytes.Equal(body, data) {
			t.Fatalf("presigned GET: %d, %d bytes", code, len(body))
		}
		if h.Get("Content-Type") != "image/png" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
			t.Errorf("presigned GET headers: %v", h)
		}
		// A guess at the object's address without a signature, or with
		// a tampered one, is refused.
		bare := strings.SplitN(get, "?", 2)[0]
		if code, _, _ := fetch(bare); code != http.StatusForbidden {
			t.Errorf("unsigned GET of %s: %d, want 403", bare, code)
		}
		if code, _, _ := fetch(strings.Replace(get, "X-Amz-Signature=", "X-Amz-Signature=0", 1)); code != http.StatusForbidden {
			t.Errorf("tampered GET: %d, want 403", code)
		}
		s.fake.Advance(5*time.Minute + time.Second)
		if code, _, _ := fetch(get); code != http.StatusForbidden {
			t.Errorf("GET after the URL expired: %d, want 403", code)
		}
		if code := put(data, hdr); code != http.StatusOK {
			t.Errorf("PUT after 5 of its 15 minutes: %d, want 200", code)
		}
		s.fake.Advance(10 * time.Minute)
		if code := put(data, hdr); code != http.StatusForbidden {
			t.Errorf("PUT after its 15 minutes: %d, want 403", code)
		}
	})
}

func TestNewKeysAreRandomAndNotSequential(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 10000; i++ {
		k := blob.NewKey()
		if seen[k] {
			t.Fatalf("key %s twice", k)
		}
		seen[k] = true
		if len(k) != 33 || k[2] != '/' {
			t.Fatalf("key %q has the wrong shape", k)
		}
		if prev != "" && commonPrefix(prev, k) > 4 {
			t.Fatalf("consecutive keys %s and %s share a long prefix", prev, k)
		}
		prev = k
	}
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestLocalDiskRemovesWhatACrashLeftInItsTemporaryDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	l, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := blob.NewKey()
	if err := l.Put(context.Background(), key, strings.NewReader("kept"), 4, ""); err != nil {
		t.Fatal(err)
	}
	// What a put interrupted by kill -9 leaves: a temporary file.
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(filepath.Join(dir, "tmp", "put-"+strconv.Itoa(i)), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := blob.NewLocal(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	if len(ents) != 0 {
		t.Fatalf("%d temporary files survived the restart", len(ents))
	}
	if ks := keys(t, l); len(ks) != 1 || ks[0] != key {
		t.Fatalf("keys after restart: %v", ks)
	}
}
