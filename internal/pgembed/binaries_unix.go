//go:build unix

package pgembed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// What only the embedded cluster uses (cluster.go: unix only; on Windows
// chatd takes CHAT_DATABASE_URL).

// binariesFor is FindBinaries for the cluster in pgData. A cluster runs
// only under the major version of PostgreSQL that made it (its
// PG_VERSION), and a host upgraded to a newer PostgreSQL keeps the older
// one installed beside it (Debian does): the first of FindBinaries' places
// that holds that version wins. Without PG_VERSION (a cluster still to
// make), or with no place holding its version, it is FindBinaries' choice
// (and postgres says what is wrong).
func binariesFor(pgData string) (string, error) {
	dirs := binaryDirs()
	if len(dirs) == 0 {
		return "", ErrNoBinaries
	}
	raw, err := os.ReadFile(filepath.Join(pgData, "PG_VERSION"))
	if want := strings.TrimSpace(string(raw)); err == nil && want != "" {
		for _, dir := range dirs {
			if serverMajor(dir) == want {
				return dir, nil
			}
		}
	}
	return dirs[0], nil
}

// serverMajor is the major version of the postgres in dir as PG_VERSION
// spells it ("17"; "9.6" before 10), "" when it cannot be told.
func serverMajor(dir string) string {
	out, err := exec.Command(binPath(dir, "postgres"), "--version").Output()
	if err != nil {
		return ""
	}
	// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
	_, v, ok := strings.Cut(string(out), "(PostgreSQL) ")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
	parts := strings.SplitN(v, ".", 3)
	if n, err := strconv.Atoi(parts[0]); err == nil && n < 10 && len(parts) > 1 {
		return parts[0] + "." + parts[1]
	}
	return parts[0]
}

func binPath(dir, name string) string { return filepath.Join(dir, name) }

func wrapRun(what string, err error, out []byte) error {
	msg := strings.TrimSpace(string(out))
	if len(msg) > 2000 {
		msg = msg[len(msg)-2000:]
	}
	return fmt.Errorf("%s: %w: %s", what, err, msg)
}
