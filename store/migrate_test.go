package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// freshPool is a pool on an empty, unmigrated database.
func freshPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	c := pgtest.Cluster(t)
	name := fmt.Sprintf("fresh_%d", time.Now().UnixNano())
	if err := c.CreateDatabase(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), c.URL(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrateRecordsTheChecksumOfEveryMigrationItApplies(t *testing.T) {
	pool := freshPool(t)
	ms, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	before, err := store.MigrationsStatus(testCtx(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range before {
		if s.State != store.MigrationPending || s.Checksum == "" {
			t.Fatalf("before migrating: %+v", s)
		}
	}
	applied, err := store.Migrate(testCtx(t), pool)
	if err != nil || len(applied) != len(ms) {
		t.Fatalf("applied %v, %v", applied, err)
	}
	for _, m := range ms {
		var sum string
		if err := pool.QueryRow(testCtx(t), `SELECT sha256 FROM schema_migrations WHERE version = $1`, m.Version).Scan(&sum); err != nil || sum != m.Checksum {
			t.Fatalf("%s: recorded %q (%v), want %s", m.Name, sum, err, m.Checksum)
		}
	}
	after, err := store.MigrationsStatus(testCtx(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range after {
		if s.State != store.MigrationApplied || s.Applied != s.Checksum || s.AppliedAt == nil {
			t.Fatalf("after migrating: %+v", s)
		}
	}
}

func TestMigrateRefusesADatabaseWhoseAppliedMigrationWasEdited(t *testing.T) {
	pool := pgtest.NewPool(t)
	ms, _ := store.Migrations()
	edited := ms[len(ms)/2]
	// What the database applied differs from this binary's file, as when a
	// shipped file is edited afterwards.
	if _, err := pool.Exec(testCtx(t), `UPDATE schema_migrations SET sha256 = $2 WHERE version = $1`, edited.Version, strings.Repeat("ab", 32)); err != nil {
		t.Fatal(err)
	}
	_, err := store.Migrate(testCtx(t), pool)
	var se *store.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrSchema) || se.Migration != edited.Name ||
		!strings.Contains(err.Error(), edited.Name) || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("migrate over an edited migration: %v", err)
	}
	st, err := store.MigrationsStatus(testCtx(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if want := store.MigrationApplied; s.Version == edited.Version {
			want = store.MigrationEdited
			if s.State != want {
				t.Fatalf("%s: %s, want %s", s.Name, s.State, want)
			}
		} else if s.State != want {
			t.Fatalf("%s: %s, want %s", s.Name, s.State, want)
		}
	}
}

func TestMigrateRefusesADatabaseOfANewerChatd(t *testing.T) {
	pool := pgtest.NewPool(t)
	ms, _ := store.Migrations()
	latest := ms[len(ms)-1].Version
	newer := latest + 2
	if _, err := pool.Exec(testCtx(t), `INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)`,
		newer, fmt.Sprintf("%04d_from_the_future.sql", newer), strings.Repeat("cd", 32)); err != nil {
		t.Fatal(err)
	}
	_, err := store.Migrate(testCtx(t), pool)
	want := fmt.Sprintf("database schema %d is newer than this binary's %d", newer, latest)
	if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), want) {
		t.Fatalf("migrate a newer database: %v, want %q", err, want)
	}
}

func TestMigrateRefusesADatabaseMissingAMigrationOfThisBinary(t *testing.T) {
	pool := pgtest.NewPool(t)
	// Applied, below this binary's latest, but not one of its files.
	if _, err := pool.Exec(testCtx(t), `INSERT INTO schema_migrations (version, name, sha256) VALUES (0, '0000_deleted.sql', 'x')`); err != nil {
		t.Fatal(err)
	}
	_, err := store.Migrate(testCtx(t), pool)
	if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), "0000_deleted.sql") || !strings.Contains(err.Error(), "missing from this binary") {
		t.Fatalf("migrate with a missing file: %v", err)
	}
}

func TestMigrateAdoptsChecksumsOfMigrationsAppliedBeforeTheyWereRecorded(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(testCtx(t), `UPDATE schema_migrations SET sha256 = NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(testCtx(t), pool); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM schema_migrations WHERE sha256 IS NULL`); n != 0 {
		t.Fatalf("%d migrations still without a checksum", n)
	}
}

// A database a chatd migrated before migrations were recorded with their
// checksums has no sha256 column until the next Migrate adds it: chatctl
// migrate status (which changes nothing) and the schema check of
// chatctl's database commands read it as it is, its migrations applied.
func TestMigrationStatusAndTheSchemaCheckReadADatabaseMigratedBeforeChecksumsWereRecorded(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(testCtx(t), `ALTER TABLE schema_migrations DROP COLUMN sha256`); err != nil {
		t.Fatal(err)
	}
	st, err := store.MigrationsStatus(testCtx(t), pool)
	if err != nil {
		t.Fatalf("migration status of a database without checksums: %v", err)
	}
	ms, _ := store.Migrations()
	if len(st) != len(ms) {
		t.Fatalf("migration status lists %d migrations, want %d", len(st), len(ms))
	}
	for _, s := range st {
		if s.State != store.MigrationApplied || s.Applied != "" || s.AppliedAt == nil {
			t.Errorf("migration %s: state %s, applied sha256 %q, applied at %v; want applied, no sha256 recorded, a time", s.Name, s.State, s.Applied, s.AppliedAt)
		}
	}
	if err := store.CheckSchema(testCtx(t), pool); err != nil {
		t.Fatalf("schema check of a database without checksums: %v", err)
	}
	if _, err := store.Migrate(testCtx(t), pool); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM schema_migrations WHERE sha256 IS NULL`); n != 0 {
		t.Fatalf("%d migrations still without a checksum after Migrate", n)
	}
}

func TestEveryMigrateReappliesTheSQLFunctions(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(testCtx(t), `DROP FUNCTION chat_send_batch(text[], bigint[], bigint[], uuid[], text[], bigint[], bigint[], bigint[], text[], boolean[], interval, interval, text[], text[], jsonb[], text[])`); err != nil {
		t.Fatal(err)
	}
	applied, err := store.Migrate(testCtx(t), pool)
	if err != nil || len(applied) != 0 {
		t.Fatalf("migrate an up-to-date database: %v, %v", applied, err)
	}
	st := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	c := mustGroup(t, st, 1, 2)
	mustSend(t, st, c.ID, 1, "the function is back")
}

// A stored generated column or an index expression keeps what its
// functions computed when the row was written: a function it calls must
// change only in a numbered migration that computes the column (or
// builds the index) again, as 0025, 0033 and 0038 do for search. So no
// such function is one of functions.sql's, which every Migrate redefines
// in place and which would silently leave the stored values of the old
// definition under the new one.
func TestNoStoredColumnOrIndexIsComputedByAFunctionEveryMigrateRedefines(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	functions, err := store.Functions()
	if err != nil {
		t.Fatal(err)
	}
	// The functions the expressions name, and those their bodies call
	// (which PostgreSQL records no dependency on), by name.
	rows, err := pool.Query(testCtx(t), `
		WITH RECURSIVE f(oid) AS (
			SELECT d.refobjid
			FROM pg_depend d JOIN pg_proc p ON p.oid = d.refobjid
			WHERE d.refclassid = 'pg_proc'::regclass AND p.pronamespace = 'public'::regnamespace
			  AND (d.classid = 'pg_attrdef'::regclass
			       OR d.classid = 'pg_class'::regclass AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = d.objid))
			UNION
			SELECT q.oid FROM f JOIN pg_proc p ON p.oid = f.oid
			JOIN pg_proc q ON q.pronamespace = 'public'::regnamespace AND strpos(p.prosrc, q.proname || '(') > 0)
		SELECT DISTINCT p.proname FROM f JOIN pg_proc p ON p.oid = f.oid ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "chat_search_fold") || !slices.Contains(names, "chat_search_fold_unicode") {
		t.Fatalf("functions of stored columns and indexes: %v, want chat_search_fold and what it calls among them", names)
	}
	lower := strings.ToLower(functions)
	for _, n := range names {
		if strings.Contains(lower, "function "+n+"(") {
			t.Errorf("%s computes a stored column or an index, and functions.sql (re)defines it: define it in the numbered migration that computes them", n)
		}
	}
}
