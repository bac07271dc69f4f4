package pgembed_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chatd/chatd/internal/pgembed"
)

// A cluster runs only under the major version of PostgreSQL that made it
// (its PG_VERSION). A host upgraded to a newer PostgreSQL keeps the old
// server installed beside it (Debian keeps postgresql-15 when
// postgresql-17 comes), but the binaries were chosen without looking at
// the cluster: PATH's, else pg_config's, else the newest installed, so
// the data dir an older chatd made stopped starting ("database files are
// incompatible with server") while the server that made it was there.
// The newer server here is a stand-in first on PATH that refuses every
// data dir, as a real one refuses an older cluster.
func TestAClusterStartsUnderTheServerThatMadeItWhenANewerOneComesFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	ctx := context.Background()
	dir := dataDir(t)
	c, err := pgembed.Start(ctx, pgembed.Options{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}

	newer, err := os.MkdirTemp("", "pgnewer") // reachable by the account PostgreSQL runs as under root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(newer) })
	if err := os.Chmod(newer, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo \"$(basename \"$0\") (PostgreSQL) 99.1\"; exit 0; fi\n" +
		"echo 'FATAL:  database files are incompatible with server' >&2\nexit 1\n"
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(newer, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", newer+string(os.PathListSeparator)+os.Getenv("PATH"))

	c, err = pgembed.Start(ctx, pgembed.Options{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("start the cluster with a newer PostgreSQL first on PATH: %v", err)
	}
	if err := c.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	// A new cluster still gets the first server found.
	if bin, err := pgembed.FindBinaries(); err != nil || bin != newer {
		t.Errorf("FindBinaries = %q, %v; want %q, the first on PATH", bin, err, newer)
	}
}
