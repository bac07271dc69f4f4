package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/store"
)

// TestAFailingMigrateNamesTheCommandOnce: a migration that fails is
// reported as "chatctl: migrate: apply migration <file>: <cause>; fix the
// cause and rerun ...", naming the command once and the file that failed;
// it read "migrate: migrate <file>: ...", store and command each saying
// "migrate".
func TestAFailingMigrateNamesTheCommandOnce(t *testing.T) {
	ms, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	url := freshDB(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// A table of the first migration's name without its key: the first
	// migration keeps it (IF NOT EXISTS), and its foreign keys fail.
	if _, err := conn.Exec(context.Background(), `CREATE TABLE conversation (id bigint)`); err != nil {
		t.Fatal(err)
	}
	r := chatctl(t, nil, "migrate", "--database-url", url)
	wantFail(t, r, 1, ms[0].Name, "fix the cause and rerun")
	if n := strings.Count(r.stderr, "migrate"); n != 1 || !strings.HasPrefix(r.stderr, "chatctl: migrate: ") {
		t.Errorf("stderr names migrate %d times, want once, as chatctl: migrate: ...:\n%s", n, r.stderr)
	}
}
