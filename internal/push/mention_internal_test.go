package push

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/pgtest"
)

// TestAMentionIsTheSameWhateverTheDatabasesLocale reads mentionsSQL under
// a collation whose character classes are Unicode's (a database made with
// en_US.UTF-8, say): a letter outside ASCII before the "@" does not hide
// the mention there either, as under the C locale chatd's embedded
// PostgreSQL uses, and as the web client reads it (web/src/push.js).
func TestAMentionIsTheSameWhateverTheDatabasesLocale(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// A collation of this cluster under which é is a letter.
	var coll string
	for _, name := range []string{"C.utf8", "C.UTF-8", "en_US.utf8", "und-x-icu"} {
		var unicode bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = $1)`, name).Scan(&unicode)
		if err != nil {
			t.Fatal(err)
		}
		if unicode {
			if err := conn.QueryRow(ctx, `SELECT 'é' COLLATE `+pgx.Identifier{name}.Sanitize()+` ~ '^[[:alnum:]]$'`).Scan(&unicode); err != nil {
				t.Fatal(err)
			}
		}
		if unicode {
			coll = pgx.Identifier{name}.Sanitize()
			break
		}
	}
	if coll == "" {
		t.Skip("no collation with Unicode character classes in this cluster")
	}
	for body, want := range map[string]bool{
		"@2":              true,
		"(@2)":            true,
		"café@2 tonight?": true,
		"Привет,@2":       true,
		"Привет@2":        true,
		"a@2":             false,
		"x_@2":            false,
		"9@2":             false,
		"@23":             false,
	} {
		var got bool
		q := `SELECT ` + mentionsSQL + ` FROM (SELECT $1::text COLLATE ` + coll + ` AS body) m, (SELECT 2::bigint AS user_id) w`
		if err := conn.QueryRow(ctx, q, body).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("under collation %s, %q mentions user 2: %v, want %v", coll, body, got, want)
		}
	}
}
