// Package dbopen opens chatd's PostgreSQL the way chatd does, for chatd and
// for chatctl.
//
// With a database URL it opens a pool on it (store.OpenPool settings) and
// checks that it answers. Without one it uses the embedded cluster in
// <dataDir>/pg, database "chat" (created if missing):
//   - if a live postmaster already owns that directory (chatd is running),
//     it connects to that server's Unix socket, found through
//     <dataDir>/pg/postmaster.pid (port on line 4, socket directory on
//     line 5), and never starts or stops a second server;
//   - otherwise it starts the cluster with pgembed (initdb on first use) and
//     the returned close function stops it.
//
// The close function closes the pool, then stops the cluster if Open started
// it; it is safe to call more than once. Open does not run migrations.
package dbopen
