package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	chat "github.com/chatd/chatd"
)

// NewKey returns a new blob key (chat.NewBlobKey).
func NewKey() string { return chat.NewBlobKey() }

// validKey accepts what NewKey makes, with an optional ".thumb" suffix:
// a key never names a path outside the store.
func validKey(key string) bool {
	key = strings.TrimSuffix(key, ".thumb")
	if len(key) != 33 || key[2] != '/' {
		return false
	}
	return strings.Trim(key[:2]+key[3:], "abcdefghijklmnopqrstuvwxyz234567") == ""
}

func errKey(key string) error { return fmt.Errorf("blob key %q is not one chatd makes", key) }

// Local stores blobs as files under a directory.
type Local struct {
	dir, tmp string
}

var _ chat.BlobStore = (*Local)(nil)

// NewLocal opens (creating) the store at dir and removes the temporary
// files a crash left behind: the caller must be the only process writing
// there (chatd holds its data dir's lock).
func NewLocal(dir string) (*Local, error) {
	l := &Local{dir: dir, tmp: filepath.Join(dir, "tmp")}
	if err := os.MkdirAll(l.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("create blob directory %s: %w", dir, err)
	}
	ents, err := os.ReadDir(l.tmp)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", l.tmp, err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(l.tmp, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove an interrupted upload: %w", err)
		}
	}
	return l, nil
}

// Dir is the store's directory.
func (l *Local) Dir() string { return l.dir }

func (l *Local) path(key string) (string, error) {
	if !validKey(key) {
		return "", errKey(key)
	}
	return filepath.Join(l.dir, filepath.FromSlash(key)), nil
}

// Put writes r to a temporary file, fsyncs it and renames it into place.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, _ string) (err error) {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(l.tmp, "put-*")
	if err != nil {
		return fmt.Errorf("create temporary blob: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := copyExactly(ctx, f, r, size); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync blob: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close blob: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create blob directory: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("move blob into place: %w", err)
	}
	// The rename is durable once the directory is: the caller records the
	// blob as stored right after this returns.
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open blob directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync blob directory: %w", err)
	}
	return nil
}

// copyExactly copies exactly size bytes of r to w, honouring ctx, and
// fails with chat.ErrBlobSize when r holds fewer or more.
func copyExactly(ctx context.Context, w io.Writer, r io.Reader, size int64) error {
	n, err := io.CopyBuffer(w, io.LimitReader(ctxReader{ctx, r}, size), make([]byte, 64<<10))
	if err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	if n < size {
		return fmt.Errorf("%w: %d of %d bytes", chat.ErrBlobSize, n, size)
	}
	return probeEnd(r)
}

// probeEnd fails with ErrBlobSize when r holds another byte.
func probeEnd(r io.Reader) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return fmt.Errorf("%w: more bytes than declared", chat.ErrBlobSize)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("write blob: %w", err)
		}
	}
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Open opens the blob's file.
func (l *Local) Open(_ context.Context, key string) (chat.BlobReader, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, chat.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	return f, nil
}

// Stat reports the blob file's size and time.
func (l *Local) Stat(_ context.Context, key string) (chat.BlobInfo, error) {
	p, err := l.path(key)
	if err != nil {
		return chat.BlobInfo{}, err
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return chat.BlobInfo{}, chat.ErrBlobNotFound
	}
	if err != nil {
		return chat.BlobInfo{}, fmt.Errorf("stat blob: %w", err)
	}
	return chat.BlobInfo{Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete removes the blob's file; a missing one is fine. Directories
// stay: removing one would race a Put renaming into it.
func (l *Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob: %w", err)
	}
	return nil
}

// List walks the store (temporary files excluded).
func (l *Local) List(ctx context.Context, fn func(key string) error) error {
	return filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p == l.tmp {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(l.dir, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel))
	})
}

// AbortIncomplete has nothing to do: a Put that fails removes its
// temporary file, and NewLocal removes those a crash left.
func (l *Local) AbortIncomplete(context.Context, time.Time, int) (int, error) { return 0, nil }

// Direct is false: chatd receives and serves the bytes.
func (l *Local) Direct() bool { return false }

// PresignPut is not available on local disk.
func (l *Local) PresignPut(context.Context, string, string, int64, time.Duration) (string, map[string]string, error) {
	return "", nil, chat.ErrNoDirectAccess
}

// PresignGet is not available on local disk.
func (l *Local) PresignGet(context.Context, string, time.Duration, string, string) (string, error) {
	return "", chat.ErrNoDirectAccess
}
