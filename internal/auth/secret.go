package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretFile is the name of the generated secret inside the data dir.
const SecretFile = "jwt.secret"

// SecretBytes is the size of a generated secret.
const SecretBytes = 32

// SecretPath returns <dataDir>/jwt.secret.
func SecretPath(dataDir string) string { return filepath.Join(dataDir, SecretFile) }

// LoadSecret reads the secret kept in <dataDir>/jwt.secret. A missing file
// is an error wrapping fs.ErrNotExist; it never creates one (chatctl uses
// this so that a wrong data dir does not silently mint unusable tokens).
func LoadSecret(dataDir string) ([]byte, error) {
	path := SecretPath(dataDir)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read JWT secret: %w", err)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("read JWT secret %s: not hex-encoded; delete the file to generate a new secret (this invalidates issued tokens)", path)
	}
	if len(secret) < SecretBytes {
		return nil, fmt.Errorf("read JWT secret %s: %d bytes, want at least %d; delete the file to generate a new secret (this invalidates issued tokens)", path, len(secret), SecretBytes)
	}
	return secret, nil
}

// LoadOrCreateSecret returns the secret in <dataDir>/jwt.secret, creating
// it on first use: 32 random bytes, hex-encoded, mode 0600. The file appears
// atomically and is never replaced, so two processes starting at once agree
// on one secret and it stays the same across restarts.
func LoadOrCreateSecret(dataDir string) ([]byte, error) {
	secret, err := LoadSecret(dataDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir for JWT secret: %w", err)
	}
	secret = make([]byte, SecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generate JWT secret: %w", err)
	}
	tmp, err := os.CreateTemp(dataDir, ".jwt.secret-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("create JWT secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("chmod JWT secret: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(secret) + "\n"); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write JWT secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("sync JWT secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("close JWT secret: %w", err)
	}
	// Link, unlike rename, fails if the file exists: a concurrent creator
	// that won the race keeps its secret and we read it back.
	if err := os.Link(tmp.Name(), SecretPath(dataDir)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadSecret(dataDir)
		}
		return nil, fmt.Errorf("install JWT secret: %w", err)
	}
	if d, err := os.Open(dataDir); err == nil {
		_ = d.Sync() // make the new directory entry durable
		d.Close()
	}
	return secret, nil
}
