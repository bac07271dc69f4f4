package store_test

import (
	"fmt"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
)

// profile.updated is to be kept by its latest updatedAt per user
// (docs/events.md), so the profile written last must have the latest
// updatedAt. Writes of one user's profile wait for each other (an
// advisory lock); updatedAt was the transaction's start (now()), and a
// write that began first but got the lock second stored an updatedAt
// earlier than the one before it: a consumer keeping the latest kept the
// overwritten profile. Concurrent writes, round after round until a
// deadline: the stored profile is always the one with the latest
// updatedAt, and no two writes share one.
func TestTheProfileWrittenLastHasTheLatestUpdatedAt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, _ := newStore(t)
	const user, writers = 7, 8
	deadline := time.Now().Add(5 * time.Second)
	for round := 0; time.Now().Before(deadline); round++ {
		got := make([]chat.Profile, writers)
		errs := concurrently(writers, func(i int) error {
			var err error
			got[i], err = st.SetProfile(ctx, user, chat.ProfileUpdate{DisplayName: fmt.Sprintf("name %d.%d", round, i)}, 200)
			return err
		})
		seen := map[time.Time]string{}
		latest := chat.Profile{}
		for i, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
			at := *got[i].UpdatedAt
			if other, ok := seen[at]; ok {
				t.Fatalf("round %d: %q and %q were both written at %s", round, other, got[i].DisplayName, at.Format(time.RFC3339Nano))
			}
			seen[at] = got[i].DisplayName
			if latest.UpdatedAt == nil || at.After(*latest.UpdatedAt) {
				latest = got[i]
			}
		}
		ps, err := st.Profiles(ctx, user, []int64{user})
		if err != nil {
			t.Fatal(err)
		}
		if ps[0].DisplayName != latest.DisplayName {
			t.Fatalf("round %d: the stored profile is %q (updatedAt %s), but %q has the latest updatedAt %s",
				round, ps[0].DisplayName, ps[0].UpdatedAt.Format(time.RFC3339Nano), latest.DisplayName, latest.UpdatedAt.Format(time.RFC3339Nano))
		}
	}
}
