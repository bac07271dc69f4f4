package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/blob/s3fake"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestBytesPutAgainToTheUploadURLAfterCompletionAreNeverServed: with an
// object store, the presigned upload URL stays valid until it expires
// (15 minutes) whatever happens meanwhile. Bytes PUT to it again after
// chatd checked and completed the upload (here the photo with its GPS
// position back in) must never reach members: they get the bytes chatd
// checked, stripped and hashed.
func TestBytesPutAgainToTheUploadURLAfterCompletionAreNeverServed(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, true, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	photo := mediatest.JPEGWithLocation(400, 300, 1)
	tk, r := n.ticket(t, 1, g.ID, "p.jpg", "image/jpeg", len(photo))
	if r.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", r.status, r.body)
	}
	if r = n.put(t, 1, tk, photo); r.status != http.StatusOK {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	up := decode[chat.Upload](t, r)
	if up.State != chat.UploadComplete || up.Attachment == nil {
		t.Fatalf("upload: %+v", up)
	}
	// The same URL again, still valid: the object store takes the bytes.
	if r := n.call(t, 0, tk.Method, tk.URL, photo, tk.Headers); r.status != http.StatusOK {
		t.Fatalf("second PUT to the upload URL: %d %s", r.status, r.body)
	}
	if r := n.call(t, 1, "POST", tk.CompleteURL, nil, nil); r.status != http.StatusOK {
		t.Fatalf("complete again: %d %s", r.status, r.body)
	}
	if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
		map[string]any{"clientMsgId": newID(), "attachments": []chat.AttachmentRef{{UploadID: up.UploadID}}}, nil); r.status != http.StatusCreated {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	got := n.fetch(t, 2, "/v1/attachments/"+up.UploadID, nil)
	if got.status != http.StatusOK {
		t.Fatalf("download: %d %s", got.status, got.body)
	}
	if bytes.Contains(got.body, mediatest.Latitude) {
		t.Error("a member downloaded the photo with its GPS position: bytes PUT after completion were served")
	}
	if hexSHA(got.body) != up.Attachment.SHA256 {
		t.Errorf("downloaded bytes have sha256 %s, the attachment announces %s", hexSHA(got.body), up.Attachment.SHA256)
	}
	// What the second PUT wrote is queued for when the URL expires.
	n.sweepNow(t)
	assertNoOrphans(t, n)
}

// TestAMemberAddedLaterCannotDownloadFilesFromBeforeTheirJoin: in a group
// whose history is "joined" (the default) a member added later reaches
// nothing before their join, files included: an attachment (or its
// thumbnail) of an earlier message is not found for them, by an id
// someone passed on or one they kept from before they left, as the
// message is. The files sent after their join are theirs.
func TestAMemberAddedLaterCannotDownloadFilesFromBeforeTheirJoin(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		g := mustGroup(t, ctx, n.Server, 1, "g", []int64{2})
		send := func(upload string) {
			t.Helper()
			if r := n.call(t, 1, "POST", fmt.Sprintf("/v1/conversations/%d/messages", g.ID),
				map[string]any{"clientMsgId": newID(), "attachments": []chat.AttachmentRef{{UploadID: upload}}}, nil); r.status != http.StatusCreated {
				t.Fatalf("send: %d %s", r.status, r.body)
			}
		}
		before := n.upload(t, 1, g.ID, "before.jpg", "image/jpeg", mediatest.JPEG(400, 300))
		send(before.UploadID)
		if r := n.fetch(t, 2, "/v1/attachments/"+before.UploadID, nil); r.status != http.StatusOK {
			t.Fatalf("a founder's download: %d %s", r.status, r.body)
		}
		// 3 joins; 2 leaves and is added again.
		if _, _, err := n.Service.AddMember(ctx, g.ID, 1, 3); err != nil {
			t.Fatal(err)
		}
		if err := n.Service.RemoveMember(ctx, g.ID, 1, 2); err != nil {
			t.Fatal(err)
		}
		if _, _, err := n.Service.AddMember(ctx, g.ID, 1, 2); err != nil {
			t.Fatal(err)
		}
		after := n.upload(t, 1, g.ID, "after.jpg", "image/jpeg", mediatest.JPEG(400, 300))
		send(after.UploadID)
		for _, user := range []int64{3, 2} {
			for _, path := range []string{"/v1/attachments/" + before.UploadID, "/v1/attachments/" + before.UploadID + "/thumbnail"} {
				if r := n.call(t, user, "GET", path, nil, nil); r.status != http.StatusNotFound || errCode(r) != "not_found" {
					t.Errorf("user %d, joined after the message, GET %s: %d %s", user, path, r.status, errCode(r))
				}
			}
			if r := n.fetch(t, user, "/v1/attachments/"+after.UploadID, nil); r.status != http.StatusOK {
				t.Errorf("user %d, a file sent after their join: %d %s", user, r.status, r.body)
			}
		}
		// The sender still reaches it; "all" opens it to everyone.
		if r := n.fetch(t, 1, "/v1/attachments/"+before.UploadID, nil); r.status != http.StatusOK {
			t.Errorf("the sender's download: %d %s", r.status, r.body)
		}
		if r := n.call(t, 1, "PATCH", fmt.Sprintf("/v1/conversations/%d", g.ID), map[string]any{"historyVisible": "all"}, nil); r.status != http.StatusOK {
			t.Fatalf("history all: %d %s", r.status, r.body)
		}
		if r := n.fetch(t, 3, "/v1/attachments/"+before.UploadID, nil); r.status != http.StatusOK {
			t.Errorf("history all, a later member's download: %d %s", r.status, r.body)
		}
	})
}

// TestACompletionSentToTwoNodesAtOnceAnswersBothWithTheCompleteUpload: a
// client whose POST completeUrl timed out sends it again, and the load
// balancer hands it to another node while the first is still reading the
// object. Completing is idempotent: both answer the complete upload, not
// one of them 410 "expired", which would make the client upload it again.
func TestACompletionSentToTwoNodesAtOnceAnswersBothWithTheCompleteUpload(t *testing.T) {
	t.Parallel()
	fake, err := s3fake.Start("chatd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	env := map[string]string{"CHAT_S3_ENDPOINT": fake.Endpoint(), "CHAT_S3_BUCKET": fake.Bucket, "CHAT_S3_USE_TLS": "false",
		"CHAT_S3_ACCESS_KEY": fake.AccessKey, "CHAT_S3_SECRET_KEY": fake.SecretKey}
	url := pgtest.NewDB(t)
	a := attachNode{Server: startNode(t, url, env), fake: fake}
	b := attachNode{Server: startNode(t, url, withNodeID(env, "b")), fake: fake}
	g := mustGroup(t, context.Background(), a.Server, 1, "g", []int64{2})
	voice := mediatest.WAV(500_000) // 8 MB: reading it takes a while
	tk, r := a.ticket(t, 1, g.ID, "v.wav", "audio/wav", len(voice))
	if r.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", r.status, r.body)
	}
	if r := a.call(t, 0, tk.Method, tk.URL, voice, tk.Headers); r.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	replies := make([]httpReply, 2)
	var wg sync.WaitGroup
	for i, n := range []attachNode{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = n.call(t, 1, "POST", tk.CompleteURL, nil, nil)
		}()
	}
	wg.Wait()
	for i, r := range replies {
		if r.status != http.StatusOK {
			t.Errorf("completion on node %d: %d %s", i+1, r.status, r.body)
			continue
		}
		if u := decode[chat.Upload](t, r); u.State != chat.UploadComplete || u.Attachment == nil || u.Attachment.SHA256 != hexSHA(voice) {
			t.Errorf("completion on node %d: %s", i+1, r.body)
		}
	}
	a.sweepNow(t)
	assertNoOrphans(t, a)
}
