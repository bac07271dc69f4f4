package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	chat "github.com/chatd/chatd"
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
	secret, err := a.jwtSecret(fset.Name(), *secretFlag, *dataDir)
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
// a token signed with a secret chatd does not know is useless). cmd names
// the command whose --secret explicit is, in errors.
func (a *app) jwtSecret(cmd, explicit, dataDir string) ([]byte, error) {
	if explicit != "" {
		if len(explicit) < config.MinJWTSecretBytes {
			return nil, usagef("%s: --secret is %d bytes; chatd accepts only secrets of at least %d bytes", cmd, len(explicit), config.MinJWTSecretBytes)
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

func runRevokeTokens(ctx context.Context, a *app, args []string) error {
	fs := newFlags("revoke-tokens", "revoke-tokens --user N [--database-url URL] [--data-dir DIR]",
		"Sign user N out everywhere: every token of theirs issued until now (up to the\nnext whole second) is refused from now on, for HTTP and MQTT, and so is every\ndevice certificate (mTLS, CN=N) whose NotBefore is before that second; every\nnode closes the MQTT connections one authenticated. Tokens and certificates\nissued afterwards work. The same as the user's own POST /v1/me/tokens/revoke.",
		"chatctl revoke-tokens --user 42 --database-url postgres://chat:PASSWORD@localhost:5432/chat")
	user := fs.Int64("user", 0, "user id whose tokens and device certificates to revoke")
	db := addDBFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if err := requireID(fs, "user", *user, "the user id whose tokens and device certificates to revoke"); err != nil {
		return err
	}
	return a.withService(ctx, db, func(svc *chat.Service) error {
		r, err := svc.RevokeTokens(ctx, *user)
		if err != nil {
			return fmt.Errorf("revoke-tokens: %w", err)
		}
		fmt.Fprintf(a.stdout, "tokens of user %d issued before %s are refused, and device certificates with an earlier NotBefore; their connections are being closed\n", *user, r.RevokedBefore.Format(time.RFC3339))
		return nil
	})
}
