package client_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestAReplyToACaptionlessPhotoSaysItQuotesAPhotoUntilTheRecall: bob's
// message.new of a reply to a photo sent without a caption, and his
// history, carry ReplyTo.MsgType "image"; a View holding the reply keeps
// it, and the photo's recall leaves the quote recalled with no type,
// whether the view holds the photo or not (the two ways it follows a
// quoted message).
func TestAReplyToACaptionlessPhotoSaysItQuotesAPhotoUntilTheRecall(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	api := "http://" + srv.HTTPAddr()
	alice, bob := connectHTTP(t, srv, 1, api), connectHTTP(t, srv, 2, api)
	ctx := ctxFor(t, 30*time.Second)

	a, err := alice.Upload(ctx, g.ID, "photo.png", bytes.NewReader(mediatest.PNG(40, 30)))
	if err != nil {
		t.Fatal(err)
	}
	sendUpload(t, ctx, alice, g.ID, a, "send the photo")
	if _, err := alice.SendMessage(ctx, g.ID, "nice", client.SendOptions{ReplyTo: 1}); err != nil {
		t.Fatal(err)
	}
	evs := messages(t, bob, g.ID, 2, 15*time.Second)
	if q := evs[1].ReplyTo; q == nil || q.MsgType != "image" || q.Snippet != "" {
		t.Fatalf("the reply's live quote %+v, want msgType image and no snippet", q)
	}
	page, err := bob.History(ctx, g.ID, client.HistoryOptions{Forward: true, Limit: 10})
	if err != nil || len(page) != 2 || page[1].ReplyTo == nil || page[1].ReplyTo.MsgType != "image" {
		t.Fatalf("history %+v %v, want the reply's quote with msgType image", page, err)
	}

	whole, replyOnly := client.NewView(2), client.NewView(2)
	whole.Apply(evs[0])
	whole.Apply(evs[1])
	replyOnly.Apply(evs[1])
	if q := whole.Messages(g.ID)[1].ReplyTo; q == nil || q.MsgType != "image" {
		t.Fatalf("the view's quote %+v, want msgType image", q)
	}
	if _, err := alice.Recall(ctx, g.ID, 1); err != nil {
		t.Fatal(err)
	}
	recall := nextEvent(t, bob, client.EventMessageRecalled, 15*time.Second)
	for name, v := range map[string]*client.View{"holding the photo": whole, "holding only the reply": replyOnly} {
		v.Apply(recall)
		ms := v.Messages(g.ID)
		if q := ms[len(ms)-1].ReplyTo; q == nil || !q.Recalled || q.MsgType != "" || q.Snippet != "" {
			t.Errorf("a view %s quotes %+v after the photo's recall, want it recalled with no type", name, q)
		}
	}
}
