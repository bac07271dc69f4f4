// Package migrations holds the versioned SQL schema, embedded in the binary.
// Files are named NNNN_name.sql and applied in order, each in its own
// transaction, by store.Migrate (on chatd start-up and by `chatctl migrate`).
// A file, once released, is never edited: add a new one.
package migrations

import "embed"

// FS holds the *.sql files.
//
//go:embed *.sql
var FS embed.FS
