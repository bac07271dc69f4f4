package tlsreload

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// watch holds a value loaded from files and loads it again when they
// change: what a Reloader and a CRL have in common. A load that fails
// leaves the previous value in use and is logged once per set of files;
// the files being those of the value in use again clears the failure.
type watch[T any] struct {
	what  string // names the files in logs: "TLS certificate", "client CRL"
	paths []string
	log   *slog.Logger
	now   func() time.Time
	load  func() (*T, error)
	// loaded logs (and reacts to) a value that replaced old (nil at the
	// first load); it runs under mu.
	loaded func(old, cur *T)

	cur       atomic.Pointer[T]
	nextCheck atomic.Int64 // unix nanos
	mu        sync.Mutex   // serialises loads
	stamp     []fileStamp
	badStamp  []fileStamp // the last files that failed, logged once
	reloads   atomic.Int64
	lastError atomic.Pointer[string]
}

type fileStamp struct {
	size  int64
	mtime time.Time
	info  os.FileInfo
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil
	}
	return a.size == b.size && a.mtime.Equal(b.mtime) && os.SameFile(a.info, b.info)
}

func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].same(b[i]) {
			return false
		}
	}
	return true
}

// start loads the files once; an error here is a start-up error.
func (w *watch[T]) start() error {
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.now == nil {
		w.now = time.Now
	}
	st, err := w.stat()
	if err != nil {
		return err
	}
	v, err := w.load()
	if err != nil {
		return err
	}
	w.stamp = st
	w.cur.Store(v)
	if w.loaded != nil {
		w.loaded(nil, v)
	}
	w.nextCheck.Store(w.now().Add(CheckInterval).UnixNano())
	return nil
}

func (w *watch[T]) stat() ([]fileStamp, error) {
	out := make([]fileStamp, len(w.paths))
	for i, p := range w.paths {
		fi, err := os.Stat(p) // follows symlinks: certbot's live/ links
		if err != nil {
			return out, fmt.Errorf("read %s: %w", w.what, err)
		}
		out[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime(), info: fi}
	}
	return out, nil
}

// get is the value in use, after looking at the files if the last look
// is CheckInterval old.
func (w *watch[T]) get() *T {
	if now := w.now().UnixNano(); now >= w.nextCheck.Load() {
		w.nextCheck.Store(now + int64(CheckInterval))
		_ = w.check(false)
	}
	return w.cur.Load()
}

// check loads the files when forced or when they changed since the last
// load.
func (w *watch[T]) check(force bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, err := w.stat()
	if err == nil && !force && sameStamps(st, w.stamp) {
		// The files are those of the value in use: a broken update
		// that was moved back is no longer failing.
		if w.lastError.Swap(nil) != nil {
			w.badStamp = nil
			w.log.Info(w.what+" files are those in use again", "file", w.paths[0])
		}
		return nil
	}
	var v *T
	if err == nil {
		v, err = w.load()
	}
	if err != nil {
		msg := err.Error()
		w.lastError.Store(&msg)
		if force || !sameStamps(st, w.badStamp) {
			w.badStamp = st
			w.log.Warn(w.what+" not reloaded; the previous one stays in use", "file", w.paths[0], "err", err)
		}
		return err
	}
	w.stamp, w.badStamp = st, nil
	w.lastError.Store(nil)
	old := w.cur.Swap(v)
	w.reloads.Add(1)
	if w.loaded != nil {
		w.loaded(old, v)
	}
	return nil
}

func (w *watch[T]) lastErr() error {
	if p := w.lastError.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}
