package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// quoteReader is one reader of TestEveryPathGivesEachReaderTheQuoteLiveDeliveryLeftThem:
// the entries (lo, hi] theirs, and their history floor (chat.FloorHidesEdit);
// former readers have no history, their catch-up is a range with Until.
type quoteReader struct {
	name            string
	user            int64
	floor, lo, hi   int64
	former, history bool
}

// Every path that gives a reader a reply, live delivery (the send's
// message.new, then the edits and recall of the quoted message it
// delivers), catch-up, history and Kafka, leaves them the same quote:
// catch-up and history give the quote a client holds after applying what
// it got live (an edit it may read updates it, a hidden one does not; a
// recall makes it recalled), and Kafka the quote the send published (or
// recalled). The readers are a founder, a member added later, one who
// left, and one removed and added back (both memberships), in a "joined"
// group and in an "all" one; the quotes are of messages edited several
// times before and after the reply, recalled, cleared of their caption,
// a reply, and a forward. A former member reads as the group's history
// visibility was at their leave.
func TestEveryPathGivesEachReaderTheQuoteLiveDeliveryLeftThem(t *testing.T) {
	t.Parallel()
	// "opened since": "joined" until after the leaves, then "all"; a
	// former member reads as the group was at their leave.
	for _, visible := range []string{chat.HistoryJoined, chat.HistoryAll, "opened since"} {
		t.Run(visible, func(t *testing.T) {
			t.Parallel()
			ctx, st, pool, g := groupOf12(t)
			sess := store.NewSessions(pool)
			const owner, founder, late, gone, readded = 1, 2, 9, 8, 7
			if visible == chat.HistoryAll {
				openHistory(t, ctx, st, g.ID, owner)
			}
			type edited struct {
				seq, target int64
				body        string
			}
			var edits []edited
			recalled := map[int64]bool{}
			var replies []chat.Message
			doEdit := func(target int64, by int64, body string) {
				t.Helper()
				res := mustChange(t, st, edit(g.ID, by, target, body))
				edits = append(edits, edited{res.Entry.Seq, target, body})
			}
			reply := func(to int64, body string) chat.Message {
				t.Helper()
				r := mustReply(t, st, g.ID, founder, body, to)
				replies = append(replies, r)
				return r
			}

			old := mustSend(t, st, g.ID, owner, "before you came")
			doomed := mustSend(t, st, g.ID, owner, "to be recalled")
			photo := mustSendFiles(t, st, g.ID, owner, "photo caption", []chat.AttachmentRef{{UploadID: completeUpload(t, pool, owner, g.ID)}})
			doEdit(old.Seq, owner, "edited once before the joins")
			joinFloor := lastSeq(t, pool, g.ID)
			for _, u := range []int64{late, gone, readded} {
				mustAdd(t, ctx, st, g.ID, owner, u, "")
			}
			reply(old.Seq, "re old")
			doEdit(old.Seq, owner, "edited twice")
			re2 := reply(old.Seq, "re old again")
			reply(re2.Seq, "re re")
			reply(doomed.Seq, "re doomed")
			reply(photo.Seq, "re photo")
			doEdit(photo.Seq, owner, "")
			reply(photo.Seq, "re cleared photo")
			fwd := mustSendReq(t, st, forwardReq(g.ID, owner, g.ID, old.Seq))
			reply(fwd.Seq, "re forward")
			doEdit(re2.Seq, founder, "re old again, edited")
			removedAt := lastSeq(t, pool, g.ID)
			mustRemove(t, ctx, st, g.ID, owner, readded, "remove the one added back later")
			doEdit(old.Seq, owner, "edited thrice")
			reply(old.Seq, "re old while 7 is away")
			rejoinFloor := lastSeq(t, pool, g.ID)
			mustAdd(t, ctx, st, g.ID, owner, readded, "")
			reply(old.Seq, "re old after the re-add")
			doEdit(old.Seq, owner, "edited four times")
			doEdit(photo.Seq, owner, "a new caption")
			leftAt := lastSeq(t, pool, g.ID)
			mustRemove(t, ctx, st, g.ID, gone, gone, "gone leaves")
			doEdit(old.Seq, owner, "edited after the leave")
			mustChange(t, st, change(chat.KindRecall, g.ID, owner, doomed.Seq))
			recalled[doomed.Seq] = true
			end := lastSeq(t, pool, g.ID)
			if visible == "opened since" {
				openHistory(t, ctx, st, g.ID, owner)
			}

			floorOf := func(f int64) int64 {
				if visible == chat.HistoryAll {
					return 0
				}
				return f
			}
			readers := []quoteReader{
				{name: "founder", user: founder, hi: end, history: true},
				{name: "late member", user: late, floor: floorOf(joinFloor), lo: joinFloor, hi: end, history: true},
				{name: "former member", user: gone, floor: floorOf(joinFloor), lo: joinFloor, hi: leftAt, former: true},
				{name: "removed, first membership", user: readded, floor: floorOf(joinFloor), lo: joinFloor, hi: removedAt, former: true},
				{name: "added back", user: readded, floor: floorOf(rejoinFloor), lo: rejoinFloor, hi: end, history: true},
			}
			// want is the quote of reply r a client of reader holds after
			// live delivery: the one sent, each later edit it may read.
			want := func(rd quoteReader, r chat.Message) chat.ReplyRef {
				q := *r.ReplyTo
				if recalled[q.Seq] {
					return chat.ReplyRef{Seq: q.Seq, SenderID: q.SenderID, Recalled: true}
				}
				for _, e := range edits {
					if e.target == q.Seq && e.seq > r.Seq && e.seq <= rd.hi && !chat.FloorHidesEdit(e.target, rd.floor) {
						q.Snippet = e.body
					}
				}
				return q
			}
			check := func(path string, rd quoteReader, got []chat.Message) {
				t.Helper()
				bySeq := indexBySeq(got)
				for _, r := range replies {
					if r.Seq <= rd.lo || r.Seq > rd.hi {
						continue
					}
					m, ok := bySeq[r.Seq]
					if !ok || m.ReplyTo == nil {
						t.Errorf("%s: %s has no reply at seq %d (%q)", rd.name, path, r.Seq, r.Body)
						continue
					}
					if w := want(rd, r); *m.ReplyTo != w {
						t.Errorf("%s: %s quotes %+v in reply %d (%q), want %+v (sent with %q)", rd.name, path, *m.ReplyTo, r.Seq, r.Body, w, r.ReplyTo.Snippet)
					}
				}
			}
			for _, rd := range readers {
				if visible == "opened since" && !rd.former {
					continue // the quotes follow the edits now, as the founder's do
				}
				rg := chat.Range{ConversationID: g.ID, After: rd.lo}
				if rd.former {
					rg.Until = rd.hi
				}
				check("catch-up", rd, sinceOne(t, ctx, sess, rd.user, rg))
				if rd.history {
					check("history", rd, mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: rd.user, AfterSeq: rd.lo, Limit: 100}))
				}
			}

			refs := make([]chat.MessageRef, len(replies))
			for i, r := range replies {
				refs[i] = chat.MessageRef{ConversationID: g.ID, Seq: r.Seq}
			}
			relayed, err := sess.Entries(ctx, refs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range replies {
				w := *r.ReplyTo
				if recalled[w.Seq] {
					w = chat.ReplyRef{Seq: w.Seq, SenderID: w.SenderID, Recalled: true}
				}
				if got := relayed[refs[i]].ReplyTo; got == nil || *got != w {
					t.Errorf("Kafka quotes %+v in reply %d (%q), want %+v, as sent", got, r.Seq, r.Body, w)
				}
			}
		})
	}
}
