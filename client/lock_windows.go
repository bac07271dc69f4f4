//go:build windows

package client

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes an exclusive lock on f's first byte without waiting; the
// system drops it when the handle closes or the process exits, so a crash
// leaves no stale lock.
func lockFile(f *os.File) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
}
