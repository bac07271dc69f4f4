package pgembed

import (
	"errors"
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

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
