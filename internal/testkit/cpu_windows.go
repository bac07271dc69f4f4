//go:build windows

package testkit

import (
	"syscall"
	"time"
)

// ProcessCPU is the user and system CPU time this process used so far.
func ProcessCPU() (time.Duration, error) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, err
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, err
	}
	// A FILETIME here counts 100 ns intervals, not a time since 1601.
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100, nil
}
