package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// avatarUpload records a complete avatar upload of user's: a PNG.
func avatarUpload(t *testing.T, pool *pgxpool.Pool, user int64) string {
	t.Helper()
	ctx := testCtx(t)
	as := store.NewAttachments(pool)
	id := chat.NewUploadID()
	if err := as.CreateUpload(ctx, chat.UploadRecord{ID: id, BlobKey: chat.NewBlobKey(), UploaderID: user, Purpose: chat.PurposeAvatar,
		Name: "a.png", DeclaredType: "image/png", DeclaredSize: 10, URLExpiresAt: time.Now().Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := as.CompleteUpload(ctx, id, chat.UploadMeta{ContentType: "image/png", Size: 10, SHA256: "00"}); !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	return id
}

// Profile writes racing, each with an avatar upload of its own, before
// the user has a profile row: one avatar is in use at the end, every
// other upload that was the avatar for a moment is released with its blob
// queued, and none is left in use but unreferenced.
func TestRacingAvatarChangesLeaveOneAvatarAndReleaseEveryOther(t *testing.T) {
	st, pool := newStore(t)
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = avatarUpload(t, pool, 1)
	}
	errs := concurrently(n, func(i int) error {
		_, err := st.SetProfile(context.Background(), 1, chat.ProfileUpdate{DisplayName: "Ann", AvatarUploadID: &ids[i]}, 100)
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE state = 'avatar'`); c != 1 {
		t.Fatalf("%d avatars in use, want 1", c)
	}
	if c := queryInt(t, pool, `SELECT count(*) FROM attachment a JOIN user_profile p ON p.avatar_upload_id = a.id
		WHERE a.state = 'avatar' AND p.user_id = 1 AND p.avatar_url = '/v1/attachments/' || a.id`); c != 1 {
		t.Fatal("the avatar in use is not the profile's")
	}
	if c := queryInt(t, pool, `SELECT count(*) FROM attachment a JOIN blob_deletion d ON d.blob_key = a.blob_key
		WHERE a.state = 'released'`); c != n-1 {
		t.Fatalf("%d released avatars queued, want %d", c, n-1)
	}
}

// One avatar upload named by racing writes, of the user's profile and of
// a group: one takes it, the others are refused as a conflict.
func TestAnAvatarUploadIsUsedOnceWhateverTheConcurrentWrites(t *testing.T) {
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	id := avatarUpload(t, pool, 1)
	errs := concurrently(10, func(i int) error {
		if i%2 == 0 {
			_, err := st.UpdateGroup(context.Background(), g.ID, 1, chat.GroupUpdate{AvatarUploadID: &id})
			return err
		}
		_, err := st.SetProfile(context.Background(), 1, chat.ProfileUpdate{DisplayName: "Ann", AvatarUploadID: &id}, 100)
		return err
	})
	ok, conflict := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case isCode(err, chat.CodeConflict):
			conflict++
		default:
			t.Fatal(err)
		}
	}
	// The winner's repeats change nothing (the same avatar again).
	if ok < 1 || conflict < 1 || ok+conflict != 10 {
		t.Fatalf("%d took it, %d conflicts", ok, conflict)
	}
	users := queryInt(t, pool, `SELECT count(*) FROM user_profile WHERE avatar_upload_id = $1`, id)
	groups := queryInt(t, pool, `SELECT count(*) FROM conversation WHERE avatar_upload_id = $1`, id)
	if users+groups != 1 {
		t.Fatalf("the upload is the avatar of %d users and %d groups", users, groups)
	}
}
