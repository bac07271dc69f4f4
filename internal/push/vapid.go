package push

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/chatd/chatd/internal/keyfile"
)

// VAPIDFile is the name of the generated VAPID private key in the data dir.
const VAPIDFile = "vapid.key"

// VAPIDKeys is the server's VAPID key pair (RFC 8292), base64url without
// padding: Private is the P-256 scalar, Public the uncompressed point
// (the applicationServerKey a browser subscribes with).
type VAPIDKeys struct {
	Private string
	Public  string
}

// ParseVAPID derives the key pair from a base64url private key.
func ParseVAPID(private string) (VAPIDKeys, error) {
	raw, err := decodeB64(strings.TrimSpace(private))
	if err != nil {
		return VAPIDKeys{}, errors.New("VAPID private key is not base64url")
	}
	k, err := ecdh.P256().NewPrivateKey(raw)
	if err != nil {
		return VAPIDKeys{}, fmt.Errorf("VAPID private key: %w", err)
	}
	return VAPIDKeys{
		Private: base64.RawURLEncoding.EncodeToString(raw),
		Public:  base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()),
	}, nil
}

// LoadOrCreateVAPID returns the key pair kept in <dataDir>/vapid.key,
// creating it on first use (mode 0600). Like the JWT secret, the file
// appears atomically and is never replaced: browsers subscribed with its
// public key, and a new key would orphan every subscription.
func LoadOrCreateVAPID(dataDir string) (VAPIDKeys, error) {
	path := filepath.Join(dataDir, VAPIDFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		k, err := ParseVAPID(string(raw))
		if err != nil {
			return VAPIDKeys{}, fmt.Errorf("read %s: %w; restore the file (a new key orphans every browser subscription) or set vapid_private_key", path, err)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return VAPIDKeys{}, fmt.Errorf("read VAPID key: %w", err)
	}
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return VAPIDKeys{}, fmt.Errorf("generate VAPID key: %w", err)
	}
	// Created or not (a concurrent creator keeps its key), the file read
	// back is the key.
	if _, err := keyfile.Create(path, []byte(base64.RawURLEncoding.EncodeToString(k.Bytes())+"\n")); err != nil {
		return VAPIDKeys{}, fmt.Errorf("install VAPID key: %w", err)
	}
	return LoadOrCreateVAPID(dataDir)
}
