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

// The last member leaving archives a group, and an archived group has
// nobody left who may fetch its avatar (its current members): the avatar
// upload is released with the archive, its blob queued for deletion, and
// the group row names it no more.
func TestTheLastMemberLeavingReleasesTheGroupsAvatarUpload(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	g := mustGroup(t, st, 1, 2)
	id := avatarUpload(t, pool, 2)
	if _, err := st.SetRole(ctx, g.ID, 1, 2, chat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateGroup(ctx, g.ID, 2, chat.GroupUpdate{AvatarUploadID: &id}); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, ctx, st, g.ID, 2, 2, "the admin who set the avatar leaves")
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE id = $1 AND state = 'avatar'`, id); n != 1 {
		t.Fatal("the avatar of a group with a member left is no longer in use")
	}
	mustRemove(t, ctx, st, g.ID, 1, 1, "the last member leaves")
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE id = $1 AND state = 'released'`, id); n != 1 {
		t.Fatal("the avatar of the archived group is not released")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM attachment a JOIN blob_deletion d ON d.blob_key = a.blob_key WHERE a.id = $1`, id); n != 1 {
		t.Fatal("the archived group's avatar blob is not queued for deletion")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM conversation WHERE id = $1 AND archived_at IS NOT NULL
		AND avatar_url IS NULL AND avatar_upload_id IS NULL`, g.ID); n != 1 {
		t.Fatal("the archived group still names its released avatar")
	}
}
