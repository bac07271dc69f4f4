package pgembed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries says the PostgreSQL server programs were not found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found: install them (Debian: apt-get install -y postgresql) or set CHAT_DATABASE_URL to an existing database")

// FindBinaries returns the directory holding initdb and postgres: PATH first,
// then `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin.
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	for _, dir := range matches {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
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
