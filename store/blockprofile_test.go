package store_test

import (
	"fmt"
	"slices"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// A block hides the blocker's avatar and about from the blocked user
// (their display name still labels the blocker's messages in the groups
// they share), in every read and every event: the blocked user's
// Profiles answer, the avatar's download, the blocker's later
// profile.updated (the name alone to them), and the profile.updated of
// the blocker's unchanged profile at the block (the name alone to them)
// and at the unblock (whole to all), only when the block changed
// something they could see; each in the outbox with the whole profile.
func TestABlockShowsTheBlockedUserOnlyTheBlockersNameAndTellsThemAtBlockAndUnblock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rec := &publishRecorder{types: []string{chat.EventProfileUpdated}}
	st, pool := newStoreRecording(t, rec)
	const blocker, blocked, other, stranger = 1, 2, 3, 9
	mustGroup(t, st, blocker, blocked, other)
	avatar := avatarUpload(t, pool, blocker)
	full, err := st.SetProfile(ctx, blocker, chat.ProfileUpdate{DisplayName: "Ann", About: new("climber"), AvatarUploadID: &avatar}, 100)
	if err != nil {
		t.Fatal(err)
	}
	as := store.NewAttachments(pool)
	if _, err := as.Attachment(ctx, avatar, blocked); err != nil {
		t.Fatalf("before the block, the avatar's download: %v", err)
	}
	seen := len(rec.events())

	if err := st.Block(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	evs := rec.events()[seen:]
	if len(evs) != 2 || !slices.Equal(evs[0].To, []int64{blocker, other}) || *evs[0].About != "climber" ||
		!evs[0].UpdatedAt.Equal(*full.UpdatedAt) || !slices.Equal(evs[1].To, []int64{blocked}) || *evs[1].DisplayName != "Ann" ||
		*evs[1].Avatar != "" || *evs[1].About != "" {
		t.Fatalf("at the block, profile.updated %s, want the unchanged profile to users 1 and 3 and to user 2 alone named Ann, without avatar and about", describe(evs))
	}
	if err := st.Block(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Block(ctx, blocker, stranger, 100); err != nil {
		t.Fatal(err)
	}
	if evs := rec.events()[seen+2:]; len(evs) != 0 {
		t.Fatalf("a block again, and one of a user who sees nothing of the blocker, published %s", describe(evs))
	}

	ps, err := st.Profiles(ctx, blocked, []int64{blocker})
	if err != nil || len(ps) != 1 || ps[0].DisplayName != "Ann" || ps[0].Avatar != nil || ps[0].About != "" {
		t.Fatalf("the blocked user reads the blocker's profile %+v, %v: want the name alone", ps, err)
	}
	if ps, err := st.Profiles(ctx, other, []int64{blocker}); err != nil || len(ps) != 1 || ps[0].Avatar == nil || ps[0].About != "climber" {
		t.Fatalf("another member reads %+v, %v: want the whole profile", ps, err)
	}
	_, err = as.Attachment(ctx, avatar, blocked)
	wantCode(t, "the blocked user downloads the blocker's avatar", err, chat.CodeNotFound)
	if _, err := as.Attachment(ctx, avatar, other); err != nil {
		t.Fatalf("another member downloads the avatar: %v", err)
	}

	seen = len(rec.events())
	if full, err = st.SetProfile(ctx, blocker, chat.ProfileUpdate{DisplayName: "Ann", About: new("runner")}, 100); err != nil {
		t.Fatal(err)
	}
	if evs := rec.events()[seen:]; len(evs) != 2 || !slices.Equal(evs[0].To, []int64{blocker, other}) || *evs[0].About != "runner" ||
		!slices.Equal(evs[1].To, []int64{blocked}) || *evs[1].Avatar != "" || *evs[1].About != "" || !evs[1].UpdatedAt.Equal(*full.UpdatedAt) {
		t.Fatalf("a change after the block: %s, want it to users 1 and 3, and to user 2 the name alone", describe(evs))
	}
	if aud, err := st.ProfileAudience(ctx, blocker, 100); err != nil || !slices.Equal(aud.Whole, []int64{blocker, other}) ||
		!slices.Equal(aud.Blocked, []int64{blocked}) {
		t.Fatalf("another node's audience of the blocker's change: %+v, %v; want 1 and 3, and 2 the name alone", aud, err)
	}

	seen = len(rec.events())
	if err := st.Unblock(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Unblock(ctx, blocker, blocked, 100); err != nil {
		t.Fatal(err)
	}
	evs = rec.events()[seen:]
	if len(evs) != 1 || !slices.Equal(evs[0].To, []int64{blocker, blocked, other}) || *evs[0].About != "runner" ||
		*evs[0].Avatar != *full.Avatar || !evs[0].UpdatedAt.Equal(*full.UpdatedAt) {
		t.Fatalf("at the unblock (twice), profile.updated %s, want one to users 1, 2 and 3 with the whole profile", describe(evs))
	}
	if ps, err := st.Profiles(ctx, blocked, []int64{blocker}); err != nil || len(ps) != 1 || ps[0].About != "runner" || ps[0].Avatar == nil {
		t.Fatalf("after the unblock the user reads %+v, %v: want the whole profile", ps, err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM outbox WHERE type = 'profile.updated'`); n != 4 {
		t.Fatalf("%d profile.updated outbox rows, want the 2 profile changes', the block's and the unblock's", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM outbox WHERE type = 'profile.updated' AND payload->>'about' NOT IN ('climber', 'runner')`); n != 0 {
		t.Fatalf("%d profile.updated outbox rows without the whole profile: other nodes and Kafka must learn nothing of the block", n)
	}
}

func describe(evs []chat.Event) string {
	out := "["
	for _, ev := range evs {
		b, _ := chat.EncodeEvent(ev)
		out += fmt.Sprintf("%s to %v; ", b, ev.To)
	}
	return out + "]"
}
