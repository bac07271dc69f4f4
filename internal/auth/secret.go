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

	"github.com/chatd/chatd/internal/keyfile"
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
	secret = make([]byte, SecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("generate JWT secret: %w", err)
	}
	created, err := keyfile.Create(SecretPath(dataDir), []byte(hex.EncodeToString(secret)+"\n"))
	if err != nil {
		return nil, fmt.Errorf("install JWT secret: %w", err)
	}
	if !created { // a concurrent creator won: its secret is the one
		return LoadSecret(dataDir)
	}
	return secret, nil
}
