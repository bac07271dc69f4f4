package store_test

import (
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// TestAReplysQuoteSaysWhatTypeOfMessageItQuotesOnEveryPath: replies to a
// photo, a voice note and a file sent without a caption, and to a text,
// carry the quoted message's msgType (none for the text) in the send's
// answer (the live message.new), history, catch-up and what the relay
// reads for Kafka; once the photo is recalled its quote says recalled and
// no type, as a recalled message shows nothing of what it was.
func TestAReplysQuoteSaysWhatTypeOfMessageItQuotesOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx, st, pool, g := groupOf12(t)
	sess := store.NewSessions(pool)
	upload := func(name, contentType string) []chat.AttachmentRef {
		return []chat.AttachmentRef{{UploadID: completeUploadOf(t, pool, 1, g.ID, name,
			chat.UploadMeta{ContentType: contentType, Size: 10, SHA256: "00"})}}
	}
	photo := mustSendFiles(t, st, g.ID, 1, "", upload("p.png", "image/png")).Seq
	quoted := map[int64]string{ // seq of a quoted message: its type
		photo: chat.MsgImage,
		mustSendFiles(t, st, g.ID, 1, "", upload("v.ogg", "audio/ogg")).Seq:       chat.MsgAudio,
		mustSendFiles(t, st, g.ID, 1, "", upload("f.pdf", "application/pdf")).Seq: chat.MsgFile,
		mustSend(t, st, g.ID, 1, "just text").Seq:                                 "",
	}
	replyOf := map[int64]int64{} // reply seq: quoted seq
	var refs []chat.MessageRef
	for seq, typ := range quoted {
		r := mustReply(t, st, g.ID, 2, "re", seq)
		if r.ReplyTo == nil || r.ReplyTo.MsgType != typ {
			t.Errorf("the send's answer quotes %+v for a reply to seq %d, want msgType %q", r.ReplyTo, seq, typ)
		}
		replyOf[r.Seq] = seq
		refs = append(refs, chat.MessageRef{ConversationID: g.ID, Seq: r.Seq})
	}

	check := func(when, path string, got []chat.Message, recalled bool) {
		t.Helper()
		bySeq := indexBySeq(got)
		for rs, qs := range replyOf {
			want := quoted[qs]
			if recalled && qs == photo {
				want = ""
			}
			if q := bySeq[rs].ReplyTo; q == nil || q.MsgType != want || q.Recalled != (recalled && qs == photo) {
				t.Errorf("%s: %s quotes %+v in the reply to seq %d, want msgType %q", when, path, q, qs, want)
			}
		}
	}
	checkAll := func(when string, recalled bool) {
		t.Helper()
		check(when, "history", mustHistory(t, st, chat.HistoryQuery{ConversationID: g.ID, UserID: 2, Limit: 100}), recalled)
		check(when, "catch-up", sinceOne(t, ctx, sess, 2, chat.Range{ConversationID: g.ID}), recalled)
		relayed, err := sess.Entries(ctx, refs)
		if err != nil {
			t.Fatal(err)
		}
		var got []chat.Message
		for _, m := range relayed {
			got = append(got, m)
		}
		check(when, "Kafka", got, recalled)
	}
	checkAll("before the recall", false)
	mustChange(t, st, change(chat.KindRecall, g.ID, 1, photo))
	checkAll("after the photo's recall", true)
}
