package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// dueNow makes every queued blob deletion due and runs a cleanup round.
func (n attachNode) sweepNow(t *testing.T) {
	t.Helper()
	if _, err := n.Pool.Exec(context.Background(), `UPDATE blob_deletion SET not_before = now()`); err != nil {
		t.Fatal(err)
	}
	n.Attachments.Sweep()
}

func (n attachNode) uploadRow(t *testing.T, id string) int {
	return queryCount(t, n, `SELECT count(*) FROM attachment WHERE id = $1`, id)
}

func TestEveryUploadRefusalLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	stores(t, map[string]string{"CHAT_MAX_UPLOAD_BYTES": "1MiB", "CHAT_UPLOAD_BYTES_PER_DAY": "3MiB",
		"CHAT_LIMIT_UPLOAD_RATE": "0.001", "CHAT_LIMIT_UPLOAD_BURST": "8"}, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		g := mustGroup(t, ctx, n.Server, 1, "g", []int64{2, 3, 4, 5, 6})
		before := queryCount(t, n, `SELECT count(*) FROM attachment`)

		// Refused at the ticket: nothing recorded, no quota charged.
		if _, r := n.ticket(t, 1, g.ID, "big.bin", "application/zip", 1<<20+1); r.status != http.StatusRequestEntityTooLarge || errCode(r) != "too_large" {
			t.Errorf("over max_upload_bytes: %d %s", r.status, r.body)
		}
		if _, r := n.ticket(t, 1, g.ID, "page.html", "text/html", 100); r.status != http.StatusUnsupportedMediaType || errCode(r) != "unsupported" {
			t.Errorf("text/html: %d %s", r.status, r.body)
		}
		if _, r := n.ticket(t, 1, g.ID, "x.svg", "image/svg+xml", 100); r.status != http.StatusUnsupportedMediaType {
			t.Errorf("SVG: %d %s", r.status, r.body)
		}
		if _, r := n.ticket(t, 9, g.ID, "a.png", "image/png", 100); r.status != http.StatusForbidden || errCode(r) != "not_member" {
			t.Errorf("non-member: %d %s", r.status, r.body)
		}
		if _, r := n.ticket(t, 1, g.ID, "", "image/png", 100); r.status != http.StatusBadRequest {
			t.Errorf("no name: %d %s", r.status, r.body)
		}
		if got := queryCount(t, n, `SELECT count(*) FROM attachment`); got != before {
			t.Fatalf("refused tickets recorded %d uploads", got-before)
		}
		if got := queryCount(t, n, `SELECT count(*) FROM upload_quota WHERE user_id = 1`); got != 0 {
			t.Fatalf("refused tickets were charged to the quota")
		}

		// The upload rate (a token bucket): 429 with Retry-After.
		for i := 0; i < 8; i++ {
			if _, r := n.ticket(t, 5, g.ID, "a.txt", "text/plain", 10); r.status != http.StatusCreated {
				t.Fatalf("ticket %d: %d %s", i+1, r.status, r.body)
			}
		}
		if _, r := n.ticket(t, 5, g.ID, "a.txt", "text/plain", 10); r.status != http.StatusTooManyRequests ||
			errCode(r) != "rate_limited" || headerInt(t, r.header, "Retry-After") < 1 {
			t.Errorf("over the upload rate: %d %v %s", r.status, r.header, r.body)
		}
		// The bytes per day: 429 until midnight UTC.
		for i := 0; i < 3; i++ {
			if _, r := n.ticket(t, 6, g.ID, "a.txt", "text/plain", 1<<20); r.status != http.StatusCreated {
				t.Fatalf("quota ticket %d: %d %s", i+1, r.status, r.body)
			}
		}
		_, r := n.ticket(t, 6, g.ID, "a.txt", "text/plain", 1)
		now := time.Now().UTC()
		untilMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
		if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "quota") ||
			time.Duration(headerInt(t, r.header, "Retry-After"))*time.Second < untilMidnight-time.Minute {
			t.Errorf("over the daily quota: %d %v %s", r.status, r.header, r.body)
		}

		// Refused with the bytes: the upload is deleted, nothing stored.
		html, _ := n.ticket(t, 1, g.ID, "cat.png", "image/png", len(mediatest.HTML()))
		if r := n.put(t, 1, html, mediatest.HTML()); r.status != http.StatusUnsupportedMediaType || errCode(r) != "unsupported" {
			t.Errorf("HTML declared as image/png: %d %s", r.status, r.body)
		}
		bomb, _ := n.ticket(t, 1, g.ID, "bomb.png", "image/png", len(mediatest.Bomb()))
		if r := n.put(t, 1, bomb, mediatest.Bomb()); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "megapixels") {
			t.Errorf("decompression bomb: %d %s", r.status, r.body)
		}
		for _, id := range []string{html.UploadID, bomb.UploadID} {
			if n.uploadRow(t, id) != 0 {
				t.Errorf("refused upload %s is still recorded", id)
			}
		}
		if n.fake == nil {
			// More bytes than declared (no Content-Length: the body is
			// read until it says so).
			long, _ := n.ticket(t, 1, g.ID, "a.txt", "text/plain", 100)
			req, _ := http.NewRequest("PUT", "http://"+n.HTTPAddr()+long.URL, io.MultiReader(strings.NewReader(strings.Repeat("a", 150))))
			req.Header.Set("Authorization", "Bearer "+testnode.Token(t, 1))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || n.uploadRow(t, long.UploadID) != 0 {
				t.Errorf("more bytes than declared: %d", resp.StatusCode)
			}
			tooLong, _ := n.ticket(t, 1, g.ID, "a.txt", "text/plain", 100)
			if r := n.call(t, 1, "PUT", tooLong.URL, []byte(strings.Repeat("a", 101)), nil); r.status != http.StatusRequestEntityTooLarge {
				t.Errorf("Content-Length over the declared size: %d %s", r.status, r.body)
			}
			if r := n.call(t, 2, "PUT", "/v1/uploads/"+chat.NewUploadID(), []byte("x"), nil); r.status != http.StatusNotFound {
				t.Errorf("PUT of an unknown upload: %d", r.status)
			}
		} else {
			// The object store refuses bytes other than those signed.
			long, _ := n.ticket(t, 1, g.ID, "a.txt", "text/plain", 100)
			if r := n.call(t, 0, "PUT", long.URL, []byte(strings.Repeat("a", 101)), long.Headers); r.status != http.StatusForbidden {
				t.Errorf("S3 PUT over the signed size: %d", r.status)
			}
			if r := n.call(t, 1, "POST", long.CompleteURL, nil, nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "no bytes") {
				t.Errorf("complete without bytes: %d %s", r.status, r.body)
			}
		}
		n.sweepNow(t)
		assertNoOrphans(t, n)
		if ks := blobKeys(t, n); len(ks) != 0 {
			t.Errorf("refused uploads left blobs: %v", ks)
		}
		// Another user's upload is not theirs to PUT, complete or read.
		mine, _ := n.ticket(t, 1, g.ID, "a.txt", "text/plain", 3)
		if r := n.call(t, 2, "POST", "/v1/uploads/"+mine.UploadID+"/complete", nil, nil); r.status != http.StatusNotFound {
			t.Errorf("another user's complete: %d", r.status)
		}
		if r := n.call(t, 2, "GET", "/v1/uploads/"+mine.UploadID, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("another user's upload status: %d", r.status)
		}
	})
}

// cutPut sends the head of a PUT's body over a raw connection and closes
// it halfway, as a phone losing its network does.
func cutPut(t *testing.T, n attachNode, url string, data []byte, cutAt int) {
	t.Helper()
	c, err := net.Dial("tcp", n.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", url, testnode.Token(t, 1), len(data))
	if _, err := c.Write(data[:cutAt]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_ = c.Close()
}

func TestATruncatedUploadStaysPendingUntilSentAgain(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, n.Server, 1, "g", []int64{2})
	data := mediatest.JPEG(600, 400)
	tk, _ := n.ticket(t, 1, g.ID, "p.jpg", "image/jpeg", len(data))
	cutPut(t, n, tk.URL, data, len(data)/2)
	testkit.WaitFor(t, 5*time.Second, "the cut PUT to end", func() bool {
		r := n.call(t, 1, "GET", "/v1/uploads/"+tk.UploadID, nil, nil)
		return r.status == 200 && decode[chat.Upload](t, r).State == chat.UploadPending && !n.putting()
	})
	if ks := blobKeys(t, n); len(ks) != 0 {
		t.Fatalf("a cut upload stored %v", ks)
	}
	// A send of it is refused in the send's transaction.
	sender := rawClient(t, n.MQTTAddr(), 1, "trunc", 5, true)
	ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, attachPayload(newID(), "", tk.UploadID))
	if err != nil || ack.ReasonCode != 0x99 || !strings.Contains(ack.Properties.ReasonString, "not complete") {
		t.Fatalf("send of a truncated upload: %v 0x%x %q", err, ack.ReasonCode, ack.Properties.ReasonString)
	}
	// Sent again whole, it completes and sends.
	if r := n.put(t, 1, tk, data); r.status != 200 {
		t.Fatalf("PUT again: %d %s", r.status, r.body)
	}
	if ack, err := sender.Publish(testnode.MsgTopic(g.ID), 1, attachPayload(newID(), "", tk.UploadID)); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("send after the PUT: %v 0x%x", err, ack.ReasonCode)
	}
	assertNoOrphans(t, n)
}

// putting reports whether a PUT is writing (a file in the local store's
// temporary directory).
func (n attachNode) putting() bool {
	ents, _ := os.ReadDir(filepath.Join(server.BlobDir(n.Settings.DataDir), "tmp"))
	return len(ents) > 0
}

func reasonCode(t *testing.T, c *mqtttest.Client, topic string, payload []byte) (byte, string, string) {
	t.Helper()
	ack, err := c.Publish(topic, 1, payload)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ack.ReasonCode, userProp(ack.Properties.User, "code"), ack.Properties.ReasonString
}

func TestTheSendTransactionChecksEveryAttachment(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, n.Server, 1, "g", []int64{2})
	other := mustDirect(t, ctx, n.Server, 1, 3)
	c1 := rawClient(t, n.MQTTAddr(), 1, "c1", 5, true)
	c2 := rawClient(t, n.MQTTAddr(), 2, "c2", 5, true)
	up := func() string { return n.upload(t, 1, g.ID, "a.png", "image/png", mediatest.PNG(40, 30)).UploadID }

	a := up()
	id := newID()
	if rc, _, msg := reasonCode(t, c1, testnode.MsgTopic(g.ID), attachPayload(id, "look", a)); rc != 0 {
		t.Fatalf("first send: 0x%x %s", rc, msg)
	}
	// The same message again (a resend) is the same message...
	ack, err := c1.Publish(testnode.MsgTopic(g.ID), 1, attachPayload(id, "look", a))
	if err != nil || ack.ReasonCode != 0 || userProp(ack.Properties.User, "duplicate") != "true" || userProp(ack.Properties.User, "seq") != "1" {
		t.Fatalf("resend: %v %+v", err, ack.Properties)
	}
	// ...another message may not attach it again.
	for _, tc := range []struct {
		name    string
		client  *mqtttest.Client
		conv    int64
		uploads []string
		rc      byte
		code    string
	}{
		{"an upload attached already", c1, g.ID, []string{a}, 0x99, "conflict"},
		{"another user's upload", c2, g.ID, []string{up()}, 0x87, "forbidden"},
		{"an upload for another conversation", c1, other.ID, []string{up()}, 0x99, "invalid"},
		{"an unknown upload", c1, g.ID, []string{chat.NewUploadID()}, 0x87, "not_found"},
		{"one good upload and one attached already", c1, g.ID, []string{up(), a}, 0x99, "conflict"},
		{"the same upload twice", c1, g.ID, func() []string { u := up(); return []string{u, u} }(), 0x99, "invalid"},
		{"eleven attachments", c1, g.ID, func() []string {
			var us []string
			for i := 0; i < 11; i++ {
				us = append(us, chat.NewUploadID())
			}
			return us
		}(), 0x99, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, code, msg := reasonCode(t, tc.client, testnode.MsgTopic(tc.conv), attachPayload(newID(), "", tc.uploads...))
			if rc != tc.rc || code != tc.code {
				t.Fatalf("reason 0x%x code %q (%s), want 0x%x %s", rc, code, msg, tc.rc, tc.code)
			}
		})
	}
	// What the transaction checks is what is stored now, not what the
	// upload said at completion: a type no longer allowed, a size that
	// does not match.
	b, c := up(), up()
	if _, err := n.Pool.Exec(ctx, `UPDATE attachment SET content_type = 'application/x-msdownload' WHERE id = $1`, b); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Pool.Exec(ctx, `UPDATE attachment SET size = size + 1 WHERE id = $1`, c); err != nil {
		t.Fatal(err)
	}
	if rc, code, msg := reasonCode(t, c1, testnode.MsgTopic(g.ID), attachPayload(newID(), "", b)); rc != 0x99 || code != "unsupported" {
		t.Errorf("a type not allowed: 0x%x %s %s", rc, code, msg)
	}
	if rc, code, msg := reasonCode(t, c1, testnode.MsgTopic(g.ID), attachPayload(newID(), "", c)); rc != 0x99 || !strings.Contains(msg, "declared size") {
		t.Errorf("a size not as declared: 0x%x %s %s", rc, code, msg)
	}
	// Nothing refused was attached: only the first message has files.
	if got := queryCount(t, n, `SELECT count(*) FROM attachment WHERE state = 'attached'`); got != 1 {
		t.Errorf("%d attachments attached, want 1", got)
	}
	if got := queryCount(t, n, `SELECT count(*) FROM message WHERE conversation_id = $1`, g.ID); got != 1 {
		t.Errorf("%d messages, want 1", got)
	}
	// Over HTTP: the same checks, and the reply says what was sent.
	d := up()
	r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
		map[string]any{"clientMsgId": newID(), "body": "", "attachments": []chat.AttachmentRef{{UploadID: d, Caption: "cap"}}}, nil)
	var reply struct {
		Seq         int64
		MsgType     string
		Attachments []chat.Attachment
	}
	_ = json.Unmarshal(r.body, &reply)
	if r.status != 201 || reply.MsgType != "image" || len(reply.Attachments) != 1 || reply.Attachments[0].Caption != "cap" {
		t.Fatalf("HTTP send: %d %s", r.status, r.body)
	}
	if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
		map[string]any{"clientMsgId": newID(), "body": "", "attachments": []chat.AttachmentRef{{UploadID: d}}}, nil); r.status != 409 {
		t.Errorf("HTTP double attach: %d %s", r.status, r.body)
	}
	// A forward of a message with files copies them (the rules of the
	// copies: TestAForwardCarriesTheFilesAndKeepsThemWhileACopyIsLive).
	fwd := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", other.ID),
		map[string]any{"clientMsgId": newID(), "forward": map[string]any{"conversationId": g.ID, "seq": reply.Seq}}, nil)
	if fwd.status != http.StatusCreated || !strings.Contains(string(fwd.body), `"attachments"`) {
		t.Errorf("forward of a message with attachments: %d %s", fwd.status, fwd.body)
	}
}

func TestUploadsNeverSentExpireWithTheirBlobs(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		g := mustGroup(t, ctx, n.Server, 1, "g", []int64{2})
		kept := n.upload(t, 1, g.ID, "kept.png", "image/png", mediatest.PNG(50, 50))
		old := n.upload(t, 1, g.ID, "old.png", "image/png", mediatest.PNG(50, 50))
		pending, _ := n.ticket(t, 1, g.ID, "never.txt", "text/plain", 5)
		if len(blobKeys(t, n)) != 4 {
			t.Fatalf("blobs: %v, want 2 originals and 2 thumbnails", blobKeys(t, n))
		}
		sender := rawClient(t, n.MQTTAddr(), 1, "exp", 5, true)
		if rc, _, msg := reasonCode(t, sender, testnode.MsgTopic(g.ID), attachPayload(newID(), "", kept.UploadID)); rc != 0 {
			t.Fatalf("send: 0x%x %s", rc, msg)
		}
		// A day later (upload_ttl 24h), the two never sent go.
		if _, err := n.Pool.Exec(ctx, `UPDATE attachment SET created_at = created_at - interval '25 hours',
			url_expires_at = url_expires_at - interval '25 hours'`); err != nil {
			t.Fatal(err)
		}
		n.Attachments.Sweep()
		for _, id := range []string{old.UploadID, pending.UploadID} {
			if n.uploadRow(t, id) != 0 {
				t.Errorf("upload %s survived its TTL", id)
			}
		}
		if n.uploadRow(t, kept.UploadID) != 1 || len(blobKeys(t, n)) != 2 {
			t.Errorf("the sent attachment lost something: blobs %v", blobKeys(t, n))
		}
		if rc, code, _ := reasonCode(t, sender, testnode.MsgTopic(g.ID), attachPayload(newID(), "", old.UploadID)); rc != 0x87 || code != "not_found" {
			t.Errorf("send of an expired upload: 0x%x %s", rc, code)
		}
		// Deleting is idempotent: a second round changes nothing.
		n.Attachments.Sweep()
		assertNoOrphans(t, n)
		if n.fake != nil {
			// A presigned URL expires: 15 minutes for a PUT.
			tk, _ := n.ticket(t, 1, g.ID, "late.txt", "text/plain", 4)
			n.fake.Advance(16 * time.Minute)
			if r := n.call(t, 0, "PUT", tk.URL, []byte("late"), tk.Headers); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "expired") {
				t.Errorf("PUT after the URL expired: %d %s", r.status, r.body)
			}
			// And a download's in 5.
			dl := n.call(t, 2, "GET", "/v1/attachments/"+kept.UploadID, nil, nil)
			n.fake.Advance(5*time.Minute + time.Second)
			if r := n.call(t, 0, "GET", dl.header.Get("Location"), nil, nil); r.status != http.StatusForbidden {
				t.Errorf("GET after the URL expired: %d", r.status)
			}
		}
	})
}

// TestANewPutInterruptsOneStillRunning: a phone whose first PUT hangs on
// a dead connection sends the file again; the new PUT does not wait for
// the old one's idle timeout, and the file is stored once.
func TestANewPutInterruptsOneStillRunning(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g, err := n.Service.CreateGroup(context.Background(), 1, "g", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	data := mediatest.WAV(64 << 10) // 1 MiB
	tk, _ := n.ticket(t, 1, g.ID, "v.wav", "audio/wav", len(data))
	// The first PUT sends half and then nothing, its connection open.
	testnode.HalfPut(t, n.HTTPAddr(), tk.URL, 1, data)
	testkit.WaitFor(t, 5*time.Second, "the first PUT to be writing", n.putting)
	start := time.Now()
	if r := n.put(t, 1, tk, data); r.status != http.StatusOK {
		t.Fatalf("second PUT: %d %s", r.status, r.body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the second PUT waited %v for the first", took)
	}
	testkit.WaitFor(t, 5*time.Second, "the first PUT to end", func() bool { return !n.putting() })
	assertNoOrphans(t, n)
	if ks := blobKeys(t, n); len(ks) != 1 {
		t.Fatalf("blobs: %v", ks)
	}
}

// TestAnotherUsersPutOrCompleteDoesNotDisturbTheOwnersPut: a PUT or a
// completion of an upload by someone else is refused as not found before
// it touches the upload, so the owner's PUT still running (its body fed
// slowly) is not interrupted and completes it.
func TestAnotherUsersPutOrCompleteDoesNotDisturbTheOwnersPut(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	data := mediatest.WAV(64 << 10) // 1 MiB: half is past the head sniffed
	tk, _ := n.ticket(t, 1, g.ID, "v.wav", "audio/wav", len(data))

	pr, pw := io.Pipe()
	req, err := http.NewRequest("PUT", "http://"+n.HTTPAddr()+tk.URL, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(data))
	req.Header.Set("Authorization", "Bearer "+testnode.Token(t, 1))
	req.Header.Set("Content-Type", "audio/wav")
	type result struct {
		status int
		body   []byte
		err    error
	}
	owner := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			owner <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		owner <- result{resp.StatusCode, b, err}
	}()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	if _, err := pw.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the owner's PUT to be writing", n.putting)

	if r := n.call(t, 2, "PUT", tk.URL, data, tk.Headers); r.status != http.StatusNotFound || errCode(r) != "not_found" {
		t.Errorf("another user's PUT: %d %s", r.status, r.body)
	}
	if r := n.call(t, 2, "POST", tk.URL+"/complete", nil, nil); r.status != http.StatusNotFound || errCode(r) != "not_found" {
		t.Errorf("another user's completion: %d %s", r.status, r.body)
	}
	// The owner's own completion only reads: no bytes yet, and the PUT
	// goes on.
	if r := n.call(t, 1, "POST", tk.URL+"/complete", nil, nil); r.status != http.StatusBadRequest {
		t.Errorf("the owner's completion during the PUT: %d %s", r.status, r.body)
	}

	if _, err := pw.Write(data[len(data)/2:]); err != nil {
		t.Fatalf("the rest of the owner's PUT: %v", err)
	}
	_ = pw.Close()
	select {
	case r := <-owner:
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("the owner's PUT: %d %s %v", r.status, r.body, r.err)
		}
		if u := decode[chat.Upload](t, httpReply{status: r.status, body: r.body}); u.State != chat.UploadComplete {
			t.Fatalf("the owner's upload is %s", u.State)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's PUT did not end")
	}
	assertNoOrphans(t, n)
}

// TestAThumbnailLeftPendingByACrashIsMadeByTheNextCleanup: after a crash
// between completing an image and making its thumbnail, the cleanup round
// makes it.
func TestAThumbnailLeftPendingByACrashIsMadeByTheNextCleanup(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g, err := n.Service.CreateGroup(context.Background(), 1, "g", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	u := n.upload(t, 1, g.ID, "p.jpg", "image/jpeg", mediatest.JPEG(800, 600))
	ctx := context.Background()
	var key string
	if err := n.Pool.QueryRow(ctx, `UPDATE attachment SET thumb_state = 'pending', thumb_width = NULL, thumb_height = NULL,
		thumb_size = NULL WHERE id = $1 RETURNING blob_key`, u.UploadID).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if err := n.Blobs.Delete(ctx, chat.ThumbnailKey(key)); err != nil {
		t.Fatal(err)
	}
	n.Attachments.Sweep()
	testkit.WaitFor(t, 10*time.Second, "the thumbnail", func() bool {
		r := n.call(t, 1, "GET", "/v1/uploads/"+u.UploadID, nil, nil)
		a := decode[chat.Upload](t, r).Attachment
		return a != nil && a.Thumbnail != nil && a.Thumbnail.Width == 320
	})
	assertNoOrphans(t, n)
}
