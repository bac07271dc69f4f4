//go:build windows

package procstate

import "os"

// exists reports whether any process has pid: on Windows FindProcess
// opens the process and fails when there is none.
func exists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
