package attach

import (
	"context"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// The day's upload quota is one row per uploader and UTC day, read only
// on its day: a cleanup round forgets the days before yesterday, or the
// table grows by one row per active uploader every day, for ever.
func TestACleanupRoundForgetsTheUploadQuotaOfPastDays(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	s, err := New(Config{Store: store.NewAttachments(pool), Blobs: local, QuotaBytesPerDay: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUpload(ctx, chat.UploadRequest{ConversationID: g.ID, UserID: 1, Name: "a.txt", ContentType: "text/plain", Size: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO upload_quota (user_id, day, bytes, uploads)
		SELECT u, (now() AT TIME ZONE 'UTC')::date - d, 1000, 1 FROM generate_series(1, 2) u, generate_series(1, 40) d`); err != nil {
		t.Fatal(err)
	}
	s.Sweep()
	var days []int
	rows, err := pool.Query(ctx, `SELECT (now() AT TIME ZONE 'UTC')::date - day FROM upload_quota WHERE user_id = 1 ORDER BY day DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d int
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		days = append(days, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(days) != 2 || days[0] != 0 || days[1] != 1 {
		t.Fatalf("user 1's quota days left (days ago): %v, want [0 1]: today's and yesterday's", days)
	}
	var others int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM upload_quota WHERE user_id = 2`).Scan(&others); err != nil {
		t.Fatal(err)
	}
	if others != 1 {
		t.Fatalf("user 2 has %d quota rows, want 1 (yesterday's)", others)
	}
	// Today's charge is still counted.
	var used int64
	if err := pool.QueryRow(ctx, `SELECT bytes FROM upload_quota WHERE user_id = 1 AND day = (now() AT TIME ZONE 'UTC')::date`).Scan(&used); err != nil || used != 100 {
		t.Fatalf("today's bytes: %d %v, want 100", used, err)
	}
}
