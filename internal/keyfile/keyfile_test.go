package keyfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCreateWritesOnceWithModeOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "k.key")
	created, err := Create(path, []byte("first\n"))
	if err != nil || !created {
		t.Fatalf("first Create: created %v, %v", created, err)
	}
	created, err = Create(path, []byte("second\n"))
	if err != nil || created {
		t.Fatalf("second Create: created %v, %v; want false, nil", created, err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "first\n" {
		t.Fatalf("file holds %q (%v), want the first content", b, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".k.key-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
