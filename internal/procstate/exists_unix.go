//go:build unix

package procstate

import (
	"errors"
	"syscall"
)

// exists reports whether any process has pid: kill(pid, 0) succeeds, or
// fails only because the process belongs to another user.
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
