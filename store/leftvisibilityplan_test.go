package store_test

import (
	"testing"
)

// A former member's catch-up finds the group's history visibility at
// their leave among the entries that changed it, not by reading every
// membership and settings entry of the group: in a group that 1,000
// members joined before them and that never changed it, it reads a
// handful of system entries (their own member.added, the leave).
func TestAFormerMembersCatchUpFindsTheVisibilityAtTheLeaveWithoutReadingEveryJoin(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url, pool, st := storeAndURL(t)
	g := mustGroup(t, st, 1, 2)
	const owner, gone = 1, 8
	thousandJoins(t, ctx, pool, g.ID)
	secret := mustSend(t, st, g.ID, owner, "before you came")
	mustAdd(t, ctx, st, g.ID, owner, gone, "")
	ed := mustChange(t, st, edit(g.ID, owner, secret.Seq, "edited secret"))
	mustRemove(t, ctx, st, g.ID, gone, gone, "gone leaves")
	mustExec(t, ctx, pool, `ANALYZE message`)

	catchUpOnHiddenEdit(t, ctx, url, gone, ed.Entry, []string{"message_system_idx"})
}
