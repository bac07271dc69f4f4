package web

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel stop chatd if the test binary dies
// (a go test timeout panics without running cleanups); chatd in turn stops
// its PostgreSQL.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
