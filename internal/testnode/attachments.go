package testnode

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// CheckAttachmentBlobs fails t unless the attachment table in pool and the
// blob keys stored agree both ways: every stored blob is an attachment's
// or its thumbnail's (no orphan), and every complete or attached
// attachment has its blob, and its thumbnail's once that is ready (none
// dangling). Both the in-process and the fault suites check this after
// uploads, kills and expiry.
func CheckAttachmentBlobs(t testing.TB, pool *pgxpool.Pool, stored []string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT blob_key, state IN ('complete', 'attached', 'avatar'), thumb_state IS NOT DISTINCT FROM 'ready' FROM attachment`)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	var needed []string
	for rows.Next() {
		var key string
		var live, thumbReady bool
		if err := rows.Scan(&key, &live, &thumbReady); err != nil {
			t.Fatal(err)
		}
		known[key], known[chat.ThumbnailKey(key)] = true, true
		if live {
			needed = append(needed, key)
			if thumbReady {
				needed = append(needed, chat.ThumbnailKey(key))
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range stored {
		have[k] = true
		if !known[k] {
			t.Errorf("orphan blob %s: no attachment references it", k)
		}
	}
	for _, k := range needed {
		if !have[k] {
			t.Errorf("dangling attachment: blob %s is missing", k)
		}
	}
}
