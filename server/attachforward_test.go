package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testnode"
)

// A forward copies its source's files: rows of their own in the target
// conversation (members there fetch them, though they are not in the
// source), naming the source's blobs. The bytes stay while any copy is
// live, and go with the last one's recall.
func TestAForwardCarriesTheFilesAndKeepsThemWhileACopyIsLive(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		src := mustGroup(t, ctx, n.Server, 1, "source", []int64{2})
		dst := mustGroup(t, ctx, n.Server, 1, "target", []int64{3}) // user 3 is not in the source
		photo, doc := mediatest.PNG(400, 300), mediatest.PDF()
		up := n.upload(t, 1, src.ID, "view.png", "image/png", photo)
		du := n.upload(t, 1, src.ID, "minutes.pdf", "application/pdf", doc)
		sent := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", src.ID), map[string]any{"clientMsgId": newID(),
			"body": "both", "attachments": []chat.AttachmentRef{{UploadID: up.UploadID, Caption: "the view"}, {UploadID: du.UploadID}}}, nil)
		if sent.status != http.StatusCreated {
			t.Fatalf("send: %d %s", sent.status, sent.body)
		}
		orig := decode[struct{ Seq int64 }](t, sent)

		type reply struct {
			Seq           int64
			Body          string
			MsgType       string
			ForwardedFrom *chat.ForwardRef
			Attachments   []chat.Attachment
		}
		forward := func(user int64) reply {
			t.Helper()
			r := n.call(t, user, "POST", fmt.Sprintf("/v1/conversations/%d/messages", dst.ID),
				map[string]any{"clientMsgId": newID(), "forward": map[string]any{"conversationId": src.ID, "seq": orig.Seq}}, nil)
			if r.status != http.StatusCreated {
				t.Fatalf("forward of a message with files: %d %s", r.status, r.body)
			}
			return decode[reply](t, r)
		}
		fw := forward(1)
		if fw.Body != "both" || fw.MsgType != chat.MsgImage || fw.ForwardedFrom == nil || fw.ForwardedFrom.Seq != orig.Seq || len(fw.Attachments) != 2 {
			t.Fatalf("forward: %+v", fw)
		}
		copyID := fw.Attachments[0].ID
		if copyID == up.UploadID || fw.Attachments[1].ID == du.UploadID || chat.ValidateUploadID("id", copyID) != nil {
			t.Errorf("the copies need ids of their own: %s, %s", copyID, fw.Attachments[1].ID)
		}
		if a := fw.Attachments[0]; a.Caption != "the view" || a.Name != "view.png" || a.SHA256 != up.Attachment.SHA256 ||
			a.Width != 400 || a.Thumbnail == nil || fw.Attachments[1].Name != "minutes.pdf" {
			t.Errorf("copied attachment: %+v (thumbnail %+v), %+v", a, a.Thumbnail, fw.Attachments[1])
		}
		// The target's member fetches the copy (and its thumbnail); the
		// source's file stays the source members'.
		if r := n.fetch(t, 3, "/v1/attachments/"+copyID, nil); r.status != http.StatusOK || !bytes.Equal(r.body, photo) {
			t.Fatalf("fetch of the copy by a member of the target: %d (%d bytes)", r.status, len(r.body))
		}
		if r := n.fetch(t, 3, "/v1/attachments/"+copyID+"/thumbnail", nil); r.status != http.StatusOK {
			t.Errorf("thumbnail of the copy: %d", r.status)
		}
		if r := n.call(t, 3, "GET", "/v1/attachments/"+up.UploadID, nil, nil); r.status != http.StatusForbidden {
			t.Errorf("the source's file, by a member of the target only: %d", r.status)
		}
		h := n.call(t, 3, "GET", fmt.Sprintf("/v1/conversations/%d/messages", dst.ID), nil, nil)
		if !bytes.Contains(h.body, []byte(copyID)) {
			t.Errorf("the target's history lacks the copied files: %s", h.body)
		}
		second := forward(1) // a second copy of the same files
		assertNoOrphans(t, n)
		blobs := len(blobKeys(t, n))

		recall := func(conv, seq int64) {
			t.Helper()
			r := n.call(t, 1, "DELETE", fmt.Sprintf("/v1/conversations/%d/messages/%d", conv, seq), nil, nil)
			if r.status != http.StatusOK {
				t.Fatalf("recall %d/%d: %d %s", conv, seq, r.status, r.body)
			}
			n.sweepNow(t)
		}
		// The original recalled: gone there, the copies still whole.
		recall(src.ID, orig.Seq)
		if r := n.call(t, 2, "GET", "/v1/attachments/"+up.UploadID, nil, nil); r.status != http.StatusGone {
			t.Errorf("the recalled original: %d", r.status)
		}
		if r := n.fetch(t, 3, "/v1/attachments/"+copyID, nil); r.status != http.StatusOK || !bytes.Equal(r.body, photo) {
			t.Fatalf("the copy after the original's recall: %d (%d bytes)", r.status, len(r.body))
		}
		if got := len(blobKeys(t, n)); got != blobs {
			t.Errorf("%d blobs after the original's recall, want the %d the copies name", got, blobs)
		}
		if got := queryCount(t, n, `SELECT count(*) FROM blob_deletion`); got != 0 {
			t.Errorf("%d deletions still queued for blobs the copies name", got)
		}
		// A forward of the recalled original is refused, as before.
		if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", dst.ID),
			map[string]any{"clientMsgId": newID(), "forward": map[string]any{"conversationId": src.ID, "seq": orig.Seq}}, nil); r.status != http.StatusNotFound {
			t.Errorf("forward of a recalled message: %d %s", r.status, r.body)
		}
		recall(dst.ID, fw.Seq)
		if r := n.fetch(t, 3, "/v1/attachments/"+second.Attachments[0].ID, nil); r.status != http.StatusOK || !bytes.Equal(r.body, photo) {
			t.Fatalf("the second copy after the first copy's recall: %d", r.status)
		}
		assertNoOrphans(t, n)
		// The last copy recalled: the bytes and the thumbnail go.
		recall(dst.ID, second.Seq)
		if ks := blobKeys(t, n); len(ks) != 0 {
			t.Fatalf("blobs left once every copy is recalled: %v", ks)
		}
		assertNoOrphans(t, n)
	})
}

// A resend of a forward of files (the same clientMsgId, as a client that
// lost the answer retries) is the forward: 200 with the original seq and
// the same attachment ids, and no second set of copies is written, over
// HTTP and over MQTT alike.
func TestAResentForwardOfFilesAnswersTheSameCopiesAndWritesNoMore(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		src := mustGroup(t, ctx, n.Server, 1, "source", []int64{2})
		dst := mustGroup(t, ctx, n.Server, 1, "target", []int64{2})
		up := n.upload(t, 1, src.ID, "view.png", "image/png", mediatest.PNG(64, 48))
		sent := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", src.ID), map[string]any{"clientMsgId": newID(),
			"body": "look", "attachments": []chat.AttachmentRef{{UploadID: up.UploadID}}}, nil)
		if sent.status != http.StatusCreated {
			t.Fatalf("send: %d %s", sent.status, sent.body)
		}
		orig := decode[struct{ Seq int64 }](t, sent)
		type answer struct {
			Seq         int64
			Attachments []chat.Attachment
		}
		id := newID()
		body := map[string]any{"clientMsgId": id, "forward": map[string]any{"conversationId": src.ID, "seq": orig.Seq}}
		first := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", dst.ID), body, nil)
		if first.status != http.StatusCreated {
			t.Fatalf("forward: %d %s", first.status, first.body)
		}
		fw := decode[answer](t, first)
		rows := func() int {
			return queryCount(t, n, `SELECT count(*) FROM attachment WHERE conversation_id = $1`, dst.ID)
		}
		if len(fw.Attachments) != 1 || rows() != 1 {
			t.Fatalf("forward: %+v, %d attachment rows in the target", fw, rows())
		}
		for i := range 3 {
			again := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", dst.ID), body, nil)
			got := decode[answer](t, again)
			if again.status != http.StatusOK || got.Seq != fw.Seq || len(got.Attachments) != 1 || got.Attachments[0].ID != fw.Attachments[0].ID {
				t.Fatalf("resend %d: %d %s, want 200 with seq %d and attachment %s", i, again.status, again.body, fw.Seq, fw.Attachments[0].ID)
			}
		}
		pub := rawClient(t, n.MQTTAddr(), 1, "resender", 5, true)
		payload, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := pub.Publish(testnode.MsgTopic(dst.ID), 1, payload)
		if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "duplicate") != "true" || userProp(ack.Properties.User, "seq") != fmt.Sprint(fw.Seq) {
			t.Fatalf("resend over MQTT: %v %+v, want a duplicate with seq %d", err, ack.Properties, fw.Seq)
		}
		if got := rows(); got != 1 {
			t.Fatalf("%d attachment rows in the target after the resends, want the forward's one", got)
		}
		if got := queryCount(t, n, `SELECT last_seq FROM conversation WHERE id = $1`, dst.ID); int64(got) != fw.Seq {
			t.Fatalf("the target's last_seq is %d after the resends, want %d", got, fw.Seq)
		}
		assertNoOrphans(t, n)
	})
}
