package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/migrations"
)

// The runner is written here rather than taken from tern or goose: neither
// records what an applied migration contained, so neither notices a file
// edited after it shipped, which is the failure this runner exists to stop.
// What remains (ordering, one transaction per file, an advisory lock across
// processes) is a few dozen lines.

// migrationLockKey is the advisory lock that serialises migrations across
// processes; any constant unique to chatd works.
const migrationLockKey = 0x63686174 // "chat"

// functionsFile holds the SQL functions, re-applied by every Migrate.
const functionsFile = "functions.sql"

// Migration is one versioned SQL file.
type Migration struct {
	Version  int
	Name     string
	SQL      string
	Checksum string // hex sha256 of SQL
}

// MigrationState says how a migration stands in a database.
type MigrationState string

const (
	MigrationApplied MigrationState = "applied"
	MigrationPending MigrationState = "pending"
	// MigrationEdited: applied, but the binary's file differs from what
	// was applied.
	MigrationEdited MigrationState = "edited"
	// MigrationUnknown: applied, but this binary has no such file (a
	// newer chatd migrated the database, or a file was deleted).
	MigrationUnknown MigrationState = "unknown"
)

// MigrationStatus is one migration as the database and the binary see it.
type MigrationStatus struct {
	Version int
	Name    string
	State   MigrationState
	// Checksum is the binary's file; Applied what the database recorded
	// (empty when pending).
	Checksum, Applied string
	AppliedAt         *time.Time
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var out []Migration
	for _, name := range entries {
		if name == functionsFile {
			continue
		}
		v, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("migration %s: bad version: %w", name, err)
		}
		b, err := migrations.FS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: n, Name: name, SQL: string(b), Checksum: checksum(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// Functions returns migrations/functions.sql, which every Migrate applies
// after the numbered migrations.
func Functions() (string, error) {
	b, err := migrations.FS.ReadFile(functionsFile)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", functionsFile, err)
	}
	return string(b), nil
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SchemaError is why a database cannot be migrated by this binary: a
// migration applied there was edited or is missing from the binary, or a
// newer chatd migrated it.
type SchemaError struct {
	Migration string // file name, or "version N" when the binary lacks it
	Reason    string
}

func (e *SchemaError) Error() string { return e.Reason }

// ErrSchema matches every *SchemaError with errors.Is.
var ErrSchema = errors.New("database schema does not match this binary")

func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

// Migrate applies the pending migrations, each in its own transaction, then
// re-applies the SQL functions, all under a session advisory lock so two
// processes starting at once apply each file exactly once. It returns the
// versions it applied.
//
// Before applying anything it compares what the database recorded with the
// binary's files and refuses (*SchemaError, nothing applied) when an
// applied migration was edited since, when the binary lacks one, or when the
// database is at a newer version than the binary. Rows recorded before
// checksums existed take the binary's checksum the first time.
//
// A node that relays the outbox (Kafka configured) passes WantOutbox.
//
// Its errors name the step that failed ("apply migration 0044_x.sql: ..."),
// not "migrate": every caller says that it was migrating.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts ...MigrateOption) ([]int, error) {
	var o migrateOptions
	for _, opt := range opts {
		opt(&o)
	}
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	functions, err := Functions()
	if err != nil {
		return nil, err
	}
	var done []int
	err = withMigrationLock(ctx, pool, func(conn *pgx.Conn) error {
		status, err := readStatus(ctx, conn, ms)
		if err != nil {
			return err
		}
		if err := schemaProblem(status, ms); err != nil {
			return err
		}
		if err := adoptChecksums(ctx, conn, status); err != nil {
			return err
		}
		for _, m := range ms {
			if statusOf(status, m.Version).State != MigrationPending {
				continue
			}
			if err := applyMigration(ctx, conn, m); err != nil {
				return err
			}
			done = append(done, m.Version)
		}
		return applyFunctions(ctx, conn, functions, o.wantOutbox)
	})
	return done, err
}

// MigrateOption is something Migrate does besides migrating.
type MigrateOption func(*migrateOptions)

type migrateOptions struct{ wantOutbox bool }

// WantOutbox makes Migrate turn outbox rows on (functions.sql,
// chat_want_outbox) in the transaction that re-applies the functions: a
// node with Kafka, whose relay reads them, passes it, so no function it
// installs runs a moment without writing them, and every write that
// commits after Migrate returns writes its outbox rows.
func WantOutbox() MigrateOption { return func(o *migrateOptions) { o.wantOutbox = true } }

// wantOutboxSQL turns outbox rows on (functions.sql, chat_want_outbox).
const wantOutboxSQL = `SELECT chat_want_outbox()`

// applyFunctions re-applies functions.sql and, with wantOutbox, turns
// outbox rows on, in one transaction.
func applyFunctions(ctx context.Context, conn *pgx.Conn, functions string, wantOutbox bool) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("apply %s: %w", functionsFile, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, functions); err != nil {
		return fmt.Errorf("apply %s: %w", functionsFile, err)
	}
	if wantOutbox {
		if _, err := tx.Exec(ctx, wantOutboxSQL); err != nil {
			return fmt.Errorf("want outbox rows: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("apply %s: %w", functionsFile, err)
	}
	return nil
}

// WantOutboxRows turns outbox rows on (functions.sql, chat_want_outbox)
// on a database already migrated, as WantOutbox does in Migrate.
func WantOutboxRows(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, wantOutboxSQL); err != nil {
		return fmt.Errorf("want outbox rows: %w", err)
	}
	return nil
}

// MigrationsStatus lists every migration the binary or the database knows,
// in version order, without changing anything.
func MigrationsStatus(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: acquire connection: %w", err)
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	if !exists {
		out := make([]MigrationStatus, len(ms))
		for i, m := range ms {
			out[i] = MigrationStatus{Version: m.Version, Name: m.Name, State: MigrationPending, Checksum: m.Checksum}
		}
		return out, nil
	}
	return readStatus(ctx, conn.Conn(), ms)
}

// CheckSchema reports whether this binary may run its statements on the
// database: all of its migrations applied, none edited since, none it does
// not know (a newer chatd's). A process that uses the database without
// migrating it (chatctl's commands) checks this first, as chatd's start
// does through Migrate. The error is a *SchemaError saying what to do.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	status, err := MigrationsStatus(ctx, pool)
	if err != nil {
		return err
	}
	if err := schemaProblem(status, ms); err != nil {
		return err
	}
	var pending []MigrationStatus
	for _, s := range status {
		if s.State == MigrationPending {
			pending = append(pending, s)
		}
	}
	switch {
	case len(pending) == 0:
		return nil
	case len(pending) == len(ms):
		return &SchemaError{Migration: pending[0].Name, Reason: "the database has no chatd schema (no migration applied): is it chatd's database? " +
			"chatctl migrate (or chatd's first start) creates the schema"}
	default:
		return &SchemaError{Migration: pending[0].Name, Reason: fmt.Sprintf(
			"%d migrations of this binary are not applied to the database yet, the first %s: run chatctl migrate, or start this version of chatd, which migrates it",
			len(pending), pending[0].Name)}
	}
}

func withMigrationLock(ctx context.Context, pool *pgxpool.Pool, fn func(*pgx.Conn) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey)
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER     PRIMARY KEY,
		name       TEXT        NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
		ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS sha256 TEXT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return fn(conn.Conn())
}

// readStatus joins the recorded migrations with the binary's, by version.
func readStatus(ctx context.Context, conn *pgx.Conn, ms []Migration) ([]MigrationStatus, error) {
	// The sha256 column is read through the row's JSON: a database
	// migrated before checksums were recorded has none until Migrate adds
	// it, and MigrationsStatus and CheckSchema, which change nothing, read
	// such a database too.
	rows, err := conn.Query(ctx, `SELECT version, name, COALESCE(to_jsonb(m)->>'sha256', ''), applied_at FROM schema_migrations m ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	type applied struct {
		name, sum string
		at        time.Time
	}
	recorded := map[int]applied{}
	for rows.Next() {
		var v int
		var a applied
		if err := rows.Scan(&v, &a.name, &a.sum, &a.at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan applied migration: %w", err)
		}
		recorded[v] = a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	var out []MigrationStatus
	for _, m := range ms {
		st := MigrationStatus{Version: m.Version, Name: m.Name, Checksum: m.Checksum, State: MigrationPending}
		if a, ok := recorded[m.Version]; ok {
			at := a.at
			st.AppliedAt, st.Applied, st.State = &at, a.sum, MigrationApplied
			if a.sum != "" && a.sum != m.Checksum {
				st.State = MigrationEdited
			}
			delete(recorded, m.Version)
		}
		out = append(out, st)
	}
	for v, a := range recorded {
		at := a.at
		out = append(out, MigrationStatus{Version: v, Name: a.name, State: MigrationUnknown, Applied: a.sum, AppliedAt: &at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

func statusOf(status []MigrationStatus, version int) MigrationStatus {
	for _, s := range status {
		if s.Version == version {
			return s
		}
	}
	return MigrationStatus{}
}

// schemaProblem names the first reason this binary must not touch the
// database, or nil.
func schemaProblem(status []MigrationStatus, ms []Migration) error {
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].Version
	}
	for _, s := range status {
		if s.State == MigrationUnknown && s.Version > latest {
			newest := status[len(status)-1].Version
			return &SchemaError{Migration: s.Name, Reason: fmt.Sprintf(
				"database schema %d is newer than this binary's %d (it has %s, which this chatd does not know): run the chatd version that migrated it, or a newer one",
				newest, latest, s.Name)}
		}
	}
	for _, s := range status {
		switch s.State {
		case MigrationEdited:
			return &SchemaError{Migration: s.Name, Reason: fmt.Sprintf(
				"migration %s was edited after it was applied (applied sha256 %s, this binary's %s): a migration that shipped is never edited; restore it and put the change in a new migration",
				s.Name, s.Applied, s.Checksum)}
		case MigrationUnknown:
			return &SchemaError{Migration: s.Name, Reason: fmt.Sprintf(
				"migration %s (version %d) was applied to this database but is missing from this binary: restore the file",
				s.Name, s.Version)}
		}
	}
	return nil
}

// adoptChecksums records the binary's checksum for migrations applied
// before checksums were recorded.
func adoptChecksums(ctx context.Context, conn *pgx.Conn, status []MigrationStatus) error {
	for _, s := range status {
		if s.State == MigrationApplied && s.Applied == "" {
			if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET sha256 = $2 WHERE version = $1 AND sha256 IS NULL`, s.Version, s.Checksum); err != nil {
				return fmt.Errorf("record checksum of %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

func applyMigration(ctx context.Context, conn *pgx.Conn, m Migration) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("apply migration %s: begin: %w", m.Name, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.Name, err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)", m.Version, m.Name, m.Checksum); err != nil {
		return fmt.Errorf("apply migration %s: record version: %w", m.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("apply migration %s: commit: %w", m.Name, err)
	}
	return nil
}
