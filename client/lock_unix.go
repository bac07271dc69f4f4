//go:build unix

package client

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f without waiting; the
// kernel drops it when the process exits, so a crash leaves no stale lock.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
