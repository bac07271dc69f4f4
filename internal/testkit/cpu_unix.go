//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// ProcessCPU is the user and system CPU time this process used so far.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
