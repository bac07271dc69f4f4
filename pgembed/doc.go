// Package pgembed runs a private PostgreSQL cluster for chatd and for tests:
// it finds the server binaries, runs initdb on first start, starts the
// postmaster as a child process listening only on a Unix socket (no TCP
// port), and stops it cleanly. When the caller is root the cluster runs as an
// unprivileged account ("postgres", else "nobody"), because PostgreSQL refuses
// to run as root.
//
// A Cluster is owned by one goroutine at a time for Start/Stop; URL and
// CreateDatabase are safe for concurrent use. The postmaster gets SIGINT
// (fast shutdown) if the owning process dies, so a killed chatd never leaves
// a stray server behind. Start first waits until the postmaster recorded in
// postmaster.pid by a previous start is gone (PostgreSQL refuses to start
// while that pid exists, and a SIGKILLed postmaster keeps it as a zombie
// until it is reaped), signalling one still running; then PostgreSQL runs
// crash recovery as usual. Start assumes the caller owns the data dir
// (dbopen's lock).
package pgembed
