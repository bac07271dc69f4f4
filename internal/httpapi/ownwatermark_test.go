package httpapi_test

import (
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// TestASendersDeliveredWatermarkIsNeverShownBelowTheirReadOne: sending
// moves the sender's read watermark to their entry, and what was read was
// delivered, so every answer that shows members (the conversation, the
// member list) shows the sender's lastDeliveredSeq at least at their
// lastReadSeq: never "read but not delivered". The other members' lowest
// delivered watermark (history's deliveredSeq) is the lowest of those
// shown. A writer whose read receipts are off shows others neither: their
// lastReadSeq is 0 and their lastDeliveredSeq stays what their sessions
// acknowledged (their writing and reading do not show through it), while
// they see their own as it is, delivered at least read (and, seeing
// nobody's read state, the sender's delivered watermark alone).
func TestASendersDeliveredWatermarkIsNeverShownBelowTheirReadOne(t *testing.T) {
	e := newEnv(t)
	const quiet = 3
	g := e.group(owner, member, quiet)
	e.must(http.StatusOK, quiet, "PUT", "/v1/me/settings", map[string]bool{"readReceipts": false}, nil)
	e.sendMsg(owner, g, newID(), "one")
	sent := e.sendMsg(owner, g, newID(), "two")
	mine := e.sendMsg(quiet, g, newID(), "three")

	shown := func(viewer int64) map[int64]chat.Member {
		t.Helper()
		var conv chat.Conversation
		e.must(http.StatusOK, viewer, "GET", pathf("/v1/conversations/%d", g), nil, &conv)
		var page chat.MembersPage
		e.must(http.StatusOK, viewer, "GET", pathf("/v1/conversations/%d/members", g), nil, &page)
		out := map[int64]chat.Member{}
		for _, m := range conv.Members {
			out[m.UserID] = m
		}
		for _, m := range page.Members {
			if out[m.UserID] != m {
				t.Errorf("viewer %d: member %d is %+v in the conversation, %+v in the member list", viewer, m.UserID, out[m.UserID], m)
			}
		}
		return out
	}
	for _, viewer := range []int64{owner, member, quiet} {
		ms := shown(viewer)
		o := ms[owner]
		wantRead := sent.Seq
		if viewer == quiet {
			wantRead = 0 // they see nobody's read state
		}
		if o.LastReadSeq != wantRead || o.LastDeliveredSeq != sent.Seq {
			t.Errorf("viewer %d: the sender's lastReadSeq %d, lastDeliveredSeq %d; want %d and %d",
				viewer, o.LastReadSeq, o.LastDeliveredSeq, wantRead, sent.Seq)
		}
		q := ms[quiet]
		switch viewer {
		case quiet:
			if q.LastReadSeq != mine.Seq || q.LastDeliveredSeq < q.LastReadSeq {
				t.Errorf("the quiet writer of themselves: lastReadSeq %d, lastDeliveredSeq %d; want read %d and delivered at least read",
					q.LastReadSeq, q.LastDeliveredSeq, mine.Seq)
			}
		default:
			if q.LastReadSeq != 0 || q.LastDeliveredSeq != 0 {
				t.Errorf("viewer %d: the quiet writer shows lastReadSeq %d, lastDeliveredSeq %d; want 0 and 0 (nothing acknowledged)",
					viewer, q.LastReadSeq, q.LastDeliveredSeq)
			}
		}
		// History's deliveredSeq is the lowest of the others' shown.
		var h httpapi.HistoryReply
		e.must(http.StatusOK, viewer, "GET", pathf("/v1/conversations/%d/messages", g), nil, &h)
		low := int64(-1)
		for id, m := range ms {
			if id != viewer && (low < 0 || m.LastDeliveredSeq < low) {
				low = m.LastDeliveredSeq
			}
		}
		if h.DeliveredSeq != low {
			t.Errorf("viewer %d: history's deliveredSeq %d, the others' lowest lastDeliveredSeq shown %d", viewer, h.DeliveredSeq, low)
		}
	}
}
