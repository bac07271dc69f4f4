//go:build !linux

package web

import "os/exec"

// setParentDeathSignal: only Linux has a parent-death signal.
func setParentDeathSignal(cmd *exec.Cmd) {}
