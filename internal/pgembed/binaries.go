package pgembed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries says the PostgreSQL server programs were not found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found: install them (Debian: apt-get install -y postgresql) or set CHAT_DATABASE_URL to an existing database")

// FindBinaries returns the directory holding initdb and postgres: PATH first,
// then `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin.
func FindBinaries() (string, error) {
	dirs := binaryDirs()
	if len(dirs) == 0 {
		return "", ErrNoBinaries
	}
	return dirs[0], nil
}

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

// binaryDirs lists the directories holding initdb and postgres, in
// FindBinaries' order, each once.
func binaryDirs() []string {
	var cands []string
	if p, err := exec.LookPath("initdb"); err == nil {
		cands = append(cands, filepath.Dir(p))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		cands = append(cands, strings.TrimSpace(string(out)))
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	cands = append(cands, matches...)
	var out []string
	for _, dir := range cands {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) && !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	return out
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

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func binPath(dir, name string) string { return filepath.Join(dir, name) }

func wrapRun(what string, err error, out []byte) error {
	msg := strings.TrimSpace(string(out))
	if len(msg) > 2000 {
		msg = msg[len(msg)-2000:]
	}
	return fmt.Errorf("%s: %w: %s", what, err, msg)
}
