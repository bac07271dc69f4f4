// Package keyfile writes the secrets chatd generates into its data dir
// (the JWT secret, the VAPID key): once, whole and never replaced, so
// that processes starting together agree on one and restarts keep it.
package keyfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Create writes data to path unless a file is there already. It goes
// through a temporary file (mode 0600) linked into place: the file
// appears whole, and a concurrent creator's file wins, since a link,
// unlike a rename, fails where one exists. It reports whether this call
// created the file; when it did not, the caller reads the one there.
func Create(path string, data []byte) (created bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("create data dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new directory entry durable
		d.Close()
	}
	return true, nil
}
