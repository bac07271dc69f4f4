// Package pgembed opens chatd's PostgreSQL, for chatd, chatctl, the
// benchmarks and the tests: the one place a pool is made (OpenPool, with
// the settings the store relies on) and the embedded cluster is run.
//
// With a database URL it opens a pool on it (OpenPool's settings) and
// checks that it answers; any number of nodes may share one database, and
// no lock is taken. Without one it uses the embedded cluster in
// <dataDir>/pg, database "chat" (created if missing), in one of two roles:
//
//   - OpenOwner is chatd's: it takes an exclusive flock on
//     <dataDir>/chatd.lock and holds it until the close function has
//     stopped the cluster, so one live process at a time serves a data
//     dir. Another live holder is refused (ErrDataDirInUse, with the
//     holder's pid and what to do): a second chatd that attached to the
//     first one's server would be left without a database when the first
//     stops. The kernel drops the lock when its holder dies, however it
//     dies, so a free lock means the postmaster recorded in postmaster.pid,
//     if any, is stale: the owner waits until it is gone (a postmaster
//     still in its fast shutdown after its parent died, or a SIGKILLed one
//     that is a zombie until init reaps it), then starts the cluster, and
//     PostgreSQL's crash recovery runs.
//   - Open is chatctl's: if a live postmaster owns the directory (chatd is
//     running), it connects to that server's Unix socket, found through
//     <dataDir>/pg/postmaster.pid (port on line 4, socket directory on
//     line 5), and never starts or stops a second server. A zombie or an
//     exited pid is not a live postmaster, also while Open waits for one to
//     accept connections. Otherwise it takes the lock and starts the
//     cluster as its owner; while another process holds the lock (chatd is
//     starting its cluster) it waits to join.
//
// The close function closes the pool, then stops the cluster if this call
// started it and releases the lock; it is safe to call more than once.
// Open does not run migrations. The lock is a flock: keep the data dir on
// a local file system.
//
// # The embedded cluster
//
// The embedded cluster (and so the data dir's lock) exists on unix systems
// only: it runs PostgreSQL as an unprivileged user in a process group of
// its own and stops it by signal. On Windows, Open and OpenOwner without a
// database URL return an error that asks for one, and Cluster is a
// stand-in that fails to start with it (so pgtest and the tests on it
// compile there). Only on Linux does the
// postmaster get a parent-death signal and can a stale one be told apart
// by /proc (procstate).
//
// A Cluster is a private PostgreSQL cluster for chatd and for tests:
// it finds the server binaries (for an existing cluster, those of the
// major version in its PG_VERSION when installed), runs initdb on first start, starts the
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
// until it is reaped), signalling one still running in the data dir (a
// process that took the stale pid since runs elsewhere, and is left
// alone); then PostgreSQL runs crash recovery as usual. Start assumes the caller owns the data dir
// (OpenOwner's lock).
package pgembed
