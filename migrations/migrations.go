// Package migrations holds the versioned SQL schema, embedded in the binary.
// Files are named NNNN_name.sql and applied in order, each in its own
// transaction, by store.Migrate (on chatd start-up and by `chatctl migrate`).
// A numbered file, once released, is never edited: add a new one.
//
// functions.sql is not a migration: it holds the SQL functions as CREATE OR
// REPLACE statements and every Migrate runs it after the numbered files
// (TestEveryMigrateReappliesTheSQLFunctions), so a database migrated by an
// older chatd gets the current functions on the next start. It is edited in
// place, and it carries no checksum. A function whose signature or result
// changes is dropped by a numbered migration first (0018 does so for
// chat_send_batch), because CREATE OR REPLACE cannot change either.
package migrations

import "embed"

// FS holds the *.sql files.
//
//go:embed *.sql
var FS embed.FS
