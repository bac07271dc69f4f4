//go:build unix

package main

import (
	"os"
	"syscall"
)

// reexecWithSmallStacks restarts the process image with stackStart off
// when the environment does not decide it: the runtime reads GODEBUG only
// as the process starts, and this setting cannot be compiled in (it is
// not one of the //go:debug settings). exec keeps the process id, the
// arguments and every inherited descriptor; if it fails, chatd runs on
// with the runtime's default.
func reexecWithSmallStacks() {
	env, changed := smallStacksEnv(os.Environ())
	if !changed {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env)
}
