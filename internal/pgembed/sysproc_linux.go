package pgembed

import "syscall"

// postmasterAttr runs the postmaster as cred in a process group of its own
// (a terminal's Ctrl-C reaches chatd, which stops it in order) and, through
// Pdeathsig, makes it shut down fast if chatd dies without stopping it.
func postmasterAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
}
