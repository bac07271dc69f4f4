package pgembed

import "log/slog"

// Options configure a cluster. DataDir is required.
type Options struct {
	DataDir   string            // PGDATA; created and initdb'ed when empty
	SocketDir string            // where the Unix socket lives; default DataDir (or a short temp dir when DataDir's path is too long)
	Port      int               // names the socket file only; default 5432
	RunAs     string            // OS account when running as root; default "postgres", else "nobody"
	Settings  map[string]string // extra postgres -c settings
	Logger    *slog.Logger
}
