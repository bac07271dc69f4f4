package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/auth"
)

func runToken(_ context.Context, a *app, args []string) error {
	fset := newFlags("token", "token --user N [--ttl 24h] [--secret S | --data-dir DIR]",
		"Print an HS256 JWT for user N, signed with the secret chatd uses: --secret,\nelse $CHAT_JWT_SECRET, else the generated <data dir>/jwt.secret.",
		"chatctl token --user 42 --ttl 1h",
		"TOKEN=$(chatctl token --user 42 --data-dir /var/lib/chatd)")
	user := fset.Int64("user", 0, "user id the token is for (its sub claim)")
	ttl := fset.Duration("ttl", 24*time.Hour, "how long the token is valid")
	secretFlag := fset.String("secret", "", "HS256 secret (default $CHAT_JWT_SECRET, else <data dir>/jwt.secret)")
	dataDir := fset.String("data-dir", "", "chatd data dir holding jwt.secret (default $CHAT_DATA_DIR, else ./data)")
	if err := parse(a, fset, args); err != nil {
		return err
	}
	if err := requireID(fset, "user", *user, "the user id to mint a token for"); err != nil {
		return err
	}
	if *ttl <= 0 {
		return usagef("token: --ttl must be positive, e.g. --ttl 24h")
	}
	secret, err := a.jwtSecret(*secretFlag, *dataDir)
	if err != nil {
		return err
	}
	tok, err := auth.Mint(secret, *user, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, tok)
	return nil
}

// jwtSecret resolves the HS256 secret like chatd: explicit, else the
// configured one, else the generated file (which chatctl never creates:
// a token signed with a secret chatd does not know is useless).
func (a *app) jwtSecret(explicit, dataDir string) ([]byte, error) {
	if explicit != "" {
		if len(explicit) < config.MinJWTSecretBytes {
			return nil, usagef("token: --secret is %d bytes; chatd accepts only secrets of at least %d bytes", len(explicit), config.MinJWTSecretBytes)
		}
		return []byte(explicit), nil
	}
	if a.settings.JWTSecret != "" {
		return []byte(a.settings.JWTSecret), nil
	}
	if dataDir == "" {
		dataDir = a.settings.DataDir
	}
	secret, err := auth.LoadSecret(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no JWT secret: %s does not exist; start chatd once with this data dir (it creates the file), pass --data-dir, or give --secret / CHAT_JWT_SECRET", auth.SecretPath(dataDir))
	}
	return secret, err
}
