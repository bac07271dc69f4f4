//go:build unix

package pgembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dirLock is an exclusive flock on <dataDir>/chatd.lock. The kernel drops
// it when the holder's file is closed, so also when the process dies in any
// way: a lock that is held always belongs to a live process. The file
// records the holder's pid and program for the message of whoever finds it
// held; its contents are never trusted for anything else.
type dirLock struct {
	f *os.File
}

// lockDataDir takes the data dir's lock without waiting; ErrDataDirInUse
// when another process holds it.
func lockDataDir(dataDir string) (*dirLock, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dataDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s holds %s", ErrDataDirInUse, holder, path)
		}
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	// Record who holds it; a failure here only makes the message vaguer.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+filepath.Base(os.Args[0])+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// readHolder describes the lock holder from the file's contents.
func readHolder(f *os.File) string {
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	pid, prog, _ := strings.Cut(strings.TrimSpace(string(b[:n])), "\n")
	if _, err := strconv.Atoi(pid); err != nil {
		return "another process"
	}
	if prog = strings.TrimSpace(prog); prog == "" {
		prog = "a process"
	}
	return fmt.Sprintf("%s (pid %s)", prog, pid)
}

// release drops the lock; it is safe to call on nil.
func (l *dirLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close() // closing the descriptor drops the flock
		l.f = nil
	}
}
