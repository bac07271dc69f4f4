package main

import (
	"context"
	"fmt"

	"github.com/chatd/chatd/store"
)

func runMigrate(ctx context.Context, a *app, args []string) error {
	fs := newFlags("migrate", "migrate [--database-url URL] [--data-dir DIR]",
		"Apply the pending schema migrations, each once, and print the versions applied.\nSafe to run while chatd runs, and twice.",
		"chatctl migrate --database-url postgres://chat:PASSWORD@localhost:5432/chat",
		"CHAT_DATA_DIR=/var/lib/chatd chatctl migrate    # the embedded database")
	db := addDBFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	all, err := store.Migrations()
	if err != nil {
		return err
	}
	pool, closeDB, err := db.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeDB(context.WithoutCancel(ctx))

	applied, err := store.Migrate(ctx, pool)
	names := map[int]string{}
	for _, m := range all {
		names[m.Version] = m.Name
	}
	for _, v := range applied {
		fmt.Fprintf(a.stdout, "applied %s (version %d)\n", names[v], v)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w; fix the cause and rerun: applied versions are recorded and skipped", err)
	}
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].Version
	}
	if len(applied) == 0 {
		fmt.Fprintf(a.stdout, "nothing to apply: the schema is up to date at version %d\n", latest)
	} else {
		fmt.Fprintf(a.stdout, "the schema is now at version %d\n", latest)
	}
	return nil
}
