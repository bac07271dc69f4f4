// Package procstate tells what became of a process known only by its pid,
// as PostgreSQL's postmaster.pid records it: gone, a zombie, or running
// (and which program). It reads /proc (Linux); elsewhere it can tell only
// gone from not gone.
//
// A SIGKILLed process stays a zombie until its parent reaps it, and a
// process whose parent died is reaped by init whenever init gets to it (a
// second or two on some hosts): kill(pid, 0) succeeds all that time. A
// zombie runs nothing and holds no memory, locks or sockets; it only keeps
// its pid.
//
// The functions are safe for concurrent use.
package procstate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// State is what a pid stands for now.
type State int

const (
	// Gone: no process has the pid (kill(pid, 0) fails with ESRCH).
	Gone State = iota
	// Zombie: the process has exited and waits to be reaped; the pid is
	// still taken.
	Zombie
	// Running: a live process has the pid.
	Running
)

func (s State) String() string {
	switch s {
	case Gone:
		return "gone"
	case Zombie:
		return "zombie"
	default:
		return "running"
	}
}

// Of returns the state of pid and, for a process that is not gone, its
// program name (the executable's base name, else the command name; "" when
// neither can be read).
func Of(pid int) (State, string) {
	if pid <= 0 {
		return Gone, ""
	}
	if !exists(pid) {
		return Gone, ""
	}
	name := ""
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		name = strings.TrimSpace(string(comm))
	}
	if st, ok := stateLetter(pid); ok && (st == 'Z' || st == 'X') {
		return Zombie, name
	}
	// A zombie has no executable; a live process's is the surest name.
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
		name = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	return Running, name
}

// stateLetter reads the state field of /proc/pid/stat: the letter after
// the command name, which is in parentheses and may itself contain spaces
// and parentheses.
func stateLetter(pid int) (byte, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}

// InDir reports whether the working directory of pid is dir (the same
// directory, by whatever path), and whether that could be told: not for a
// zombie, for another user's process without the privilege to look, or
// without /proc. A PostgreSQL postmaster and its backends run in their
// data directory.
func InDir(pid int, dir string) (in, known bool) {
	if pid <= 0 {
		return false, false
	}
	cwd, err := os.Stat(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false, false
	}
	d, err := os.Stat(dir)
	if err != nil {
		return false, false
	}
	return os.SameFile(cwd, d), true
}
