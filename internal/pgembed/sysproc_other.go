//go:build unix && !linux

package pgembed

import "syscall"

// postmasterAttr runs the postmaster as cred in a process group of its own.
// There is no Pdeathsig here: a postmaster that outlives a killed chatd
// keeps running on its data dir, and since procstate cannot name the
// process without /proc, the next start leaves it alone and PostgreSQL
// refuses to start beside it until it is stopped.
func postmasterAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
