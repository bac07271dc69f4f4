package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/chatd/chatd/store"
)

func runMigrate(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && args[0] == "status" {
		return runMigrateStatus(ctx, a, args[1:])
	}
	fs := newFlags("migrate", "migrate [status] [--database-url URL] [--data-dir DIR]",
		"Apply the pending schema migrations, each once, and print the versions applied.\nSafe to run while chatd runs, and twice. A migration edited after it was applied,\none missing from this binary, or a database migrated by a newer chatd stops it\nbefore anything is applied. \"chatctl migrate status\" lists them without applying.",
		"chatctl migrate --database-url postgres://chat:PASSWORD@localhost:5432/chat",
		"CHAT_DATA_DIR=/var/lib/chatd chatctl migrate    # the embedded database")
	db := addDBFlags(fs)
	db.create = true
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

func runMigrateStatus(ctx context.Context, a *app, args []string) error {
	fs := newFlags("migrate status", "migrate status [--database-url URL] [--data-dir DIR]",
		"List every migration, applied or pending, with the sha256 of this binary's file and,\nwhen it differs, of what the database applied. Changes nothing.",
		"chatctl migrate status --database-url postgres://chat:PASSWORD@localhost:5432/chat")
	db := addDBFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	pool, closeDB, err := db.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeDB(context.WithoutCancel(ctx))
	st, err := store.MigrationsStatus(ctx, pool)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tNAME\tSTATE\tSHA256\tAPPLIED AT")
	bad := 0
	for _, m := range st {
		sum := m.Checksum
		switch m.State {
		case store.MigrationEdited:
			sum = "binary " + m.Checksum + ", applied " + m.Applied
			bad++
		case store.MigrationUnknown:
			sum = "applied " + m.Applied
			bad++
		}
		at := "-"
		if m.AppliedAt != nil {
			at = m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", m.Version, m.Name, m.State, sum, at)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if bad > 0 {
		return fmt.Errorf("%d migrations do not match this binary: chatd refuses to start on this database", bad)
	}
	return nil
}
