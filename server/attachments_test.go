package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// attachNode is a node with its blob store: local disk, or the fake S3
// (fake set).
type attachNode struct {
	*server.Server
	fake *s3fake.Server
}

// stores runs fn against a node on local disk and one on S3 (gofakes3).
func stores(t *testing.T, env map[string]string, fn func(t *testing.T, n attachNode)) {
	for _, name := range []string{"local disk", "s3"} {
		t.Run(name, func(t *testing.T) {
			fn(t, startAttachNode(t, name == "s3", env))
		})
	}
}

func startAttachNode(t testing.TB, s3 bool, env map[string]string) attachNode {
	t.Helper()
	e := map[string]string{}
	var fake *s3fake.Server
	if s3 {
		var err error
		if fake, err = s3fake.Start("chatd"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fake.Close() })
		e = map[string]string{"CHAT_S3_ENDPOINT": fake.Endpoint(), "CHAT_S3_BUCKET": fake.Bucket, "CHAT_S3_USE_TLS": "false",
			"CHAT_S3_ACCESS_KEY": fake.AccessKey, "CHAT_S3_SECRET_KEY": fake.SecretKey}
	}
	for k, v := range env {
		e[k] = v
	}
	// Tests that find a thumbnail in an upload's answer need it made
	// within the wait, and under load (parallel tests, -race, two cores)
	// it can take longer than production's 5 s; the wait ends as soon as
	// the thumbnail is made or given up.
	return attachNode{Server: startNode(t, pgtest.NewDB(t), e, server.WithThumbnailWait(time.Minute)), fake: fake}
}

// call is one HTTP request of user to the node, JSON in (unless body is
// []byte) and out (see request).
func (n attachNode) call(t *testing.T, user int64, method, path string, body any, hdr map[string]string) httpReply {
	t.Helper()
	return request(t, n.Server, user, method, path, body, hdr)
}

func decode[T any](t *testing.T, r httpReply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return v
}

func errCode(r httpReply) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// ticket asks for an upload.
func (n attachNode) ticket(t *testing.T, user, conv int64, name, ctype string, size int) (chat.UploadTicket, httpReply) {
	t.Helper()
	r := n.call(t, user, "POST", "/v1/uploads", map[string]any{"conversationId": conv, "name": name, "contentType": ctype, "size": size}, nil)
	if r.status != http.StatusCreated {
		return chat.UploadTicket{}, r
	}
	return decode[chat.UploadTicket](t, r), r
}

// put sends the bytes of a ticket where it says; with an object store,
// then completes it.
func (n attachNode) put(t *testing.T, user int64, tk chat.UploadTicket, data []byte) httpReply {
	t.Helper()
	hdr := map[string]string{}
	for k, v := range tk.Headers {
		hdr[k] = v
	}
	if tk.CompleteURL == "" {
		return n.call(t, user, tk.Method, tk.URL, data, hdr)
	}
	if r := n.call(t, 0, tk.Method, tk.URL, data, hdr); r.status != http.StatusOK {
		return r
	}
	return n.call(t, user, "POST", tk.CompleteURL, nil, nil)
}

// upload uploads data and returns the complete upload.
func (n attachNode) upload(t *testing.T, user, conv int64, name, ctype string, data []byte) chat.Upload {
	t.Helper()
	tk, r := n.ticket(t, user, conv, name, ctype, len(data))
	if r.status != http.StatusCreated {
		t.Fatalf("upload.create %s: %d %s", name, r.status, r.body)
	}
	r = n.put(t, user, tk, data)
	if r.status != http.StatusOK {
		t.Fatalf("upload %s: %d %s", name, r.status, r.body)
	}
	u := decode[chat.Upload](t, r)
	if u.State != chat.UploadComplete || u.Attachment == nil {
		t.Fatalf("upload %s: %+v", name, u)
	}
	return u
}

// fetch downloads an attachment as user, following an object store's
// redirect the way a browser does (without the bearer token).
func (n attachNode) fetch(t *testing.T, user int64, path string, hdr map[string]string) httpReply {
	t.Helper()
	r := n.call(t, user, "GET", path, nil, hdr)
	if r.status == http.StatusFound {
		if n.fake == nil {
			t.Fatal("local disk redirected")
		}
		return n.call(t, 0, "GET", r.header.Get("Location"), nil, hdr)
	}
	return r
}

type attachEvent struct {
	Type           string            `json:"type"`
	ConversationID int64             `json:"conversationId"`
	Seq            int64             `json:"seq"`
	SenderID       int64             `json:"senderId"`
	Body           *string           `json:"body"`
	MsgType        string            `json:"msgType"`
	Attachments    []chat.Attachment `json:"attachments"`
}

func nextAttachEvent(t *testing.T, c *mqtttest.Client, typ string) attachEvent {
	t.Helper()
	var ev attachEvent
	nextPublish(t, c, typ, 15*time.Second, func(pk packets.Packet) bool {
		ev = attachEvent{}
		if err := json.Unmarshal(pk.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		return ev.Type == typ
	})
	return ev
}

func attachPayload(id, body string, uploads ...string) []byte {
	refs := make([]chat.AttachmentRef, len(uploads))
	for i, u := range uploads {
		refs[i] = chat.AttachmentRef{UploadID: u}
	}
	b, _ := json.Marshal(map[string]any{"clientMsgId": id, "body": body, "attachments": refs})
	return b
}

func hexSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// blobKeys lists what the blob store holds.
func blobKeys(t *testing.T, n attachNode) []string {
	t.Helper()
	var out []string
	if err := n.Blobs.List(context.Background(), func(k string) error { out = append(out, k); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func queryCount(t *testing.T, n attachNode, q string, args ...any) int {
	t.Helper()
	return pgtest.QueryOne[int](t, n.Pool, q, args...)
}

// assertNoOrphans checks that every blob is an attachment's (or its
// thumbnail) and that every stored attachment's blob exists.
func assertNoOrphans(t *testing.T, n attachNode) {
	t.Helper()
	testnode.CheckAttachmentBlobs(t, n.Pool, blobKeys(t, n))
}

func TestAttachmentsTravelFromUploadToEveryMemberOnBothStores(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		g := mustGroup(t, ctx, n.Server, 1, "photos", []int64{2})
		sender := rawClient(t, n.MQTTAddr(), 1, "att-sender", 5, true)
		reader := rawClient(t, n.MQTTAddr(), 2, "att-reader", 5, true)

		photo := mediatest.JPEGWithLocation(1200, 800, 6)
		up := n.upload(t, 1, g.ID, "../../holiday.jpg", "image/jpeg", photo)
		a := up.Attachment
		if a.Name != "holiday.jpg" || a.ContentType != "image/jpeg" || a.Size != int64(len(photo)) ||
			a.Width != 800 || a.Height != 1200 || a.Thumbnail == nil || a.Thumbnail.Height != 320 {
			t.Fatalf("photo upload: %+v (thumbnail %+v)", a, a.Thumbnail)
		}
		voice := mediatest.WAV(2500)
		vu := n.upload(t, 1, g.ID, "voice.wav", "audio/wav", voice)
		if vu.Attachment.DurationMs != 2500 || vu.Attachment.Thumbnail != nil {
			t.Fatalf("voice upload: %+v", vu.Attachment)
		}
		doc := mediatest.PDF()
		du := n.upload(t, 1, g.ID, "minutes.pdf", "application/pdf", doc)

		id := newID()
		payload, _ := json.Marshal(map[string]any{"clientMsgId": id, "attachments": []chat.AttachmentRef{
			{UploadID: up.UploadID, Caption: "the view"}, {UploadID: vu.UploadID}, {UploadID: du.UploadID}}})
		ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, payload)
		if err != nil || ack.ReasonCode != 0 {
			t.Fatalf("send with attachments: %v reason 0x%x %s", err, ack.ReasonCode, ack.Properties.ReasonString)
		}
		ev := nextAttachEvent(t, reader, chat.EventMessageNew)
		if ev.MsgType != chat.MsgImage || len(ev.Attachments) != 3 || ev.Body == nil || *ev.Body != "" {
			t.Fatalf("message.new: %+v", ev)
		}
		if got := ev.Attachments[0]; got.ID != up.UploadID || got.Caption != "the view" || got.SHA256 != a.SHA256 ||
			got.Thumbnail == nil || got.Width != 800 {
			t.Fatalf("the photo in message.new: %+v", got)
		}
		if ev.Attachments[1].DurationMs != 2500 || ev.Attachments[2].ContentType != "application/pdf" {
			t.Fatalf("message.new attachments: %+v", ev.Attachments)
		}

		// The reader fetches the photo: the stored bytes, without the
		// location, whose sha256 is the one announced.
		r := n.fetch(t, 2, "/v1/attachments/"+up.UploadID, nil)
		if r.status != 200 || int64(len(r.body)) != a.Size || hexSHA(r.body) != a.SHA256 {
			t.Fatalf("download: %d, %d bytes, sha %s want %s", r.status, len(r.body), hexSHA(r.body), a.SHA256)
		}
		if bytes.Contains(r.body, mediatest.Latitude) {
			t.Fatal("the original still carries its GPS latitude")
		}
		if r.header.Get("Content-Type") != "image/jpeg" || !strings.HasPrefix(r.header.Get("Content-Disposition"), "inline") {
			t.Errorf("photo headers: %v", r.header)
		}
		th := n.fetch(t, 2, "/v1/attachments/"+up.UploadID+"/thumbnail", nil)
		if th.status != 200 || th.header.Get("Content-Type") != "image/jpeg" || int64(len(th.body)) != a.Thumbnail.Size ||
			bytes.Contains(th.body, []byte("Exif")) {
			t.Fatalf("thumbnail: %d %v, %d bytes", th.status, th.header, len(th.body))
		}
		pdf := n.fetch(t, 2, "/v1/attachments/"+du.UploadID, nil)
		if !bytes.Equal(pdf.body, doc) || !strings.HasPrefix(pdf.header.Get("Content-Disposition"), `attachment; filename=minutes.pdf`) {
			t.Fatalf("pdf: %d %v", pdf.status, pdf.header)
		}
		if n.fake == nil {
			if pdf.header.Get("X-Content-Type-Options") != "nosniff" || pdf.header.Get("ETag") != `"`+hexSHA(doc)+`"` ||
				pdf.header.Get("Content-Length") != fmt.Sprint(len(doc)) {
				t.Errorf("local download headers: %v", pdf.header)
			}
			part := n.fetch(t, 2, "/v1/attachments/"+du.UploadID, map[string]string{"Range": "bytes=10-19"})
			if part.status != http.StatusPartialContent || !bytes.Equal(part.body, doc[10:20]) ||
				part.header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", len(doc)) {
				t.Errorf("range: %d %q %v", part.status, part.body, part.header)
			}
			if r := n.fetch(t, 2, "/v1/attachments/"+du.UploadID, map[string]string{"If-None-Match": pdf.header.Get("ETag")}); r.status != http.StatusNotModified {
				t.Errorf("If-None-Match: %d", r.status)
			}
			// net/http's own refusals carry the API's JSON error too, not
			// its plain text under the file's type.
			for _, c := range []struct {
				hdr    map[string]string
				status int
				code   string
			}{
				{map[string]string{"Range": fmt.Sprintf("bytes=%d-", len(doc)+10)}, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable"},
				{map[string]string{"If-Match": `"0000"`}, http.StatusPreconditionFailed, "precondition_failed"},
			} {
				r := n.fetch(t, 2, "/v1/attachments/"+du.UploadID, c.hdr)
				var e struct {
					Error struct{ Code, Message string }
				}
				if r.status != c.status || r.header.Get("Content-Type") != "application/json" ||
					json.Unmarshal(r.body, &e) != nil || e.Error.Code != c.code || e.Error.Message == "" ||
					r.header.Get("Content-Disposition") != "" {
					t.Errorf("%v: %d %v %s; want %d with a JSON error %q", c.hdr, r.status, r.header, r.body, c.status, c.code)
				}
			}
		} else {
			// The redirect is short-lived and signed for the reader.
			r := n.call(t, 2, "GET", "/v1/attachments/"+du.UploadID, nil, nil)
			if r.status != http.StatusFound || r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("s3 download: %d %v", r.status, r.header)
			}
			if n.fake.BytesIn() < int64(len(photo)+len(voice)+len(doc)) {
				t.Errorf("the object store received %d bytes: uploads did not go to it directly", n.fake.BytesIn())
			}
		}

		// History carries the same attachments.
		h := n.call(t, 2, "GET", fmt.Sprintf("/v1/conversations/%d/messages", g.ID), nil, nil)
		var page struct{ Messages []attachEvent }
		_ = json.Unmarshal(h.body, &page)
		if len(page.Messages) != 1 || page.Messages[0].MsgType != chat.MsgImage || len(page.Messages[0].Attachments) != 3 ||
			page.Messages[0].Attachments[0].Thumbnail == nil {
			t.Fatalf("history: %s", h.body)
		}
		// A member who is not one cannot fetch, by id or otherwise.
		if r := n.call(t, 3, "GET", "/v1/attachments/"+up.UploadID, nil, nil); r.status != http.StatusForbidden || errCode(r) != "not_member" {
			t.Errorf("non-member: %d %s", r.status, r.body)
		}
		if r := n.call(t, 3, "GET", "/v1/attachments/"+up.UploadID+"/thumbnail", nil, nil); r.status != http.StatusForbidden {
			t.Errorf("non-member thumbnail: %d", r.status)
		}
		if r := n.call(t, 2, "GET", "/v1/attachments/"+chat.NewUploadID(), nil, nil); r.status != http.StatusNotFound {
			t.Errorf("unknown id: %d", r.status)
		}
		if r := n.call(t, 0, "GET", "/v1/attachments/"+up.UploadID, nil, nil); r.status != http.StatusUnauthorized {
			t.Errorf("no token: %d", r.status)
		}
		assertNoOrphans(t, n)

		// Recalled: 410 for members, the blobs deleted (thumbnail too).
		seq := ev.Seq
		rec, _ := json.Marshal(map[string]any{"clientMsgId": newID(), "seq": seq})
		if ack, err := sender.Publish(fmt.Sprintf("chat/v1/conv/%d/recall", g.ID), 1, rec); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("recall: %v 0x%x", err, ack.ReasonCode)
		}
		if r := n.call(t, 2, "GET", "/v1/attachments/"+up.UploadID, nil, nil); r.status != http.StatusGone {
			t.Errorf("recalled: %d %s", r.status, r.body)
		}
		if r := n.call(t, 3, "GET", "/v1/attachments/"+up.UploadID, nil, nil); r.status != http.StatusForbidden {
			t.Errorf("recalled, non-member: %d", r.status)
		}
		if _, err := n.Pool.Exec(ctx, `UPDATE blob_deletion SET not_before = now()`); err != nil {
			t.Fatal(err)
		}
		n.Attachments.Sweep()
		if ks := blobKeys(t, n); len(ks) != 0 {
			t.Fatalf("blobs left after the recall: %v", ks)
		}
		h = n.call(t, 2, "GET", fmt.Sprintf("/v1/conversations/%d/messages", g.ID), nil, nil)
		if bytes.Contains(h.body, []byte("holiday")) || bytes.Contains(h.body, []byte(`"attachments"`)) {
			t.Fatalf("history after the recall still shows the files: %s", h.body)
		}
		assertNoOrphans(t, n)
	})
}
