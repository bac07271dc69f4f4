package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/testkit"
)

// avatarUpload uploads a PNG as user's avatar upload (complete, unused).
func (n attachNode) avatarUpload(t *testing.T, user int64, side int) chat.Upload {
	t.Helper()
	data := mediatest.PNG(side, side)
	r := n.call(t, user, "POST", "/v1/uploads", map[string]any{"purpose": "avatar", "name": "me.png", "contentType": "image/png",
		"size": len(data)}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("avatar upload.create: %d %s", r.status, r.body)
	}
	if r = n.put(t, user, decode[chat.UploadTicket](t, r), data); r.status != http.StatusOK {
		t.Fatalf("avatar upload: %d %s", r.status, r.body)
	}
	u := decode[chat.Upload](t, r)
	if u.State != chat.UploadComplete || u.Purpose != chat.PurposeAvatar || u.ConversationID != 0 || u.Attachment == nil {
		t.Fatalf("avatar upload: %+v", u)
	}
	return u
}

func (n attachNode) setMe(t *testing.T, user int64, body map[string]any) httpReply {
	t.Helper()
	body["displayName"] = fmt.Sprintf("user %d", user)
	return n.call(t, user, "PUT", "/v1/me", body, nil)
}

// blobQueued reports whether upload id's blob is queued for deletion.
func (n attachNode) blobQueued(t *testing.T, id string) bool {
	t.Helper()
	return queryCount(t, n, `SELECT count(*) FROM blob_deletion d JOIN attachment a ON a.blob_key = d.blob_key WHERE a.id = $1`, id) == 1
}

func TestAnUploadedAvatarIsSeenByWhoSeesTheProfileAndReleasedWhenReplaced(t *testing.T) {
	t.Parallel()
	stores(t, nil, func(t *testing.T, n attachNode) {
		ctx := context.Background()
		const me, peer, stranger = 1, 2, 3
		direct := mustDirect(t, ctx, n.Server, me, peer)

		// An avatar upload has no conversation, and is a picture.
		if r := n.call(t, me, "POST", "/v1/uploads", map[string]any{"purpose": "avatar", "conversationId": direct.ID,
			"name": "a.png", "contentType": "image/png", "size": 10}, nil); r.status != http.StatusBadRequest {
			t.Errorf("avatar upload with a conversation: %d %s", r.status, r.body)
		}
		if r := n.call(t, me, "POST", "/v1/uploads", map[string]any{"purpose": "avatar", "name": "a.pdf",
			"contentType": "application/pdf", "size": 10}, nil); r.status != http.StatusUnsupportedMediaType {
			t.Errorf("avatar upload of a PDF: %d %s", r.status, r.body)
		}
		if r := n.call(t, me, "POST", "/v1/uploads", map[string]any{"name": "a.png", "contentType": "image/png", "size": 10}, nil); r.status != http.StatusBadRequest {
			t.Errorf("message upload without a conversation: %d %s", r.status, r.body)
		}

		first := n.avatarUpload(t, me, 64)
		if r := n.setMe(t, me, map[string]any{"avatarUploadId": first.UploadID, "avatarUrl": "https://example.com/a.png"}); r.status != http.StatusBadRequest {
			t.Errorf("avatarUrl and avatarUploadId together: %d %s", r.status, r.body)
		}
		// Another user's upload is unknown to the caller.
		if r := n.setMe(t, peer, map[string]any{"avatarUploadId": first.UploadID}); r.status != http.StatusNotFound {
			t.Errorf("another user's avatar upload: %d %s", r.status, r.body)
		}
		r := n.setMe(t, me, map[string]any{"avatarUploadId": first.UploadID})
		if r.status != http.StatusOK {
			t.Fatalf("PUT /v1/me: %d %s", r.status, r.body)
		}
		path := "/v1/attachments/" + first.UploadID
		if p := decode[chat.Profile](t, r); p.Avatar == nil || *p.Avatar != path {
			t.Fatalf("profile avatar %v, want %s", p.Avatar, path)
		}
		if p := decode[chat.Profile](t, n.call(t, peer, "GET", "/v1/users/1", nil, nil)); p.Avatar == nil || *p.Avatar != path {
			t.Errorf("the peer sees avatar %v", p.Avatar)
		}
		// Setting it again changes nothing.
		if r := n.setMe(t, me, map[string]any{"avatarUploadId": first.UploadID}); r.status != http.StatusOK {
			t.Errorf("the same avatar again: %d %s", r.status, r.body)
		}

		// Whoever sees the profile fetches the avatar, nobody else.
		for _, u := range []int64{me, peer} {
			if got := n.fetch(t, u, path, nil); got.status != http.StatusOK || hexSHA(got.body) != first.Attachment.SHA256 {
				t.Errorf("user %d fetches the avatar: %d", u, got.status)
			}
		}
		testkit.WaitFor(t, 10*time.Second, "the avatar's thumbnail", func() bool {
			return n.fetch(t, peer, path+"/thumbnail", nil).status == http.StatusOK
		})
		if got := n.fetch(t, stranger, path, nil); got.status != http.StatusNotFound {
			t.Errorf("a stranger fetches the avatar: %d %s", got.status, got.body)
		}
		if got := n.fetch(t, stranger, path+"/thumbnail", nil); got.status != http.StatusNotFound {
			t.Errorf("a stranger fetches the avatar's thumbnail: %d %s", got.status, got.body)
		}

		// Used once: not again, not by a message.
		g := mustGroup(t, ctx, n.Server, me, "g", []int64{peer})
		if r := n.call(t, me, "PATCH", fmt.Sprintf("/v1/conversations/%d", g.ID), map[string]any{"avatarUploadId": first.UploadID}, nil); r.status != http.StatusConflict {
			t.Errorf("a used avatar upload for a group: %d %s", r.status, r.body)
		}
		unused := n.avatarUpload(t, me, 32)
		for _, id := range []string{first.UploadID, unused.UploadID} {
			if r := n.call(t, me, "POST", fmt.Sprintf("/v1/conversations/%d/messages", direct.ID),
				map[string]any{"clientMsgId": newID(), "body": "", "attachments": []chat.AttachmentRef{{UploadID: id}}}, nil); r.status != http.StatusBadRequest {
				t.Errorf("a message attaching avatar upload %s: %d %s", id, r.status, r.body)
			}
		}
		// A message's upload is not an avatar.
		msgUpload := n.upload(t, me, direct.ID, "m.png", "image/png", mediatest.PNG(20, 20))
		if r := n.setMe(t, me, map[string]any{"avatarUploadId": msgUpload.UploadID}); r.status != http.StatusBadRequest {
			t.Errorf("a message's upload as the avatar: %d %s", r.status, r.body)
		}

		// Replacing it releases the old one: queued for deletion in the
		// same transaction, gone for everyone.
		if r := n.setMe(t, me, map[string]any{"avatarUploadId": unused.UploadID}); r.status != http.StatusOK {
			t.Fatalf("replace the avatar: %d %s", r.status, r.body)
		}
		if !n.blobQueued(t, first.UploadID) {
			t.Error("the replaced avatar's blob is not queued for deletion")
		}
		if got := n.fetch(t, peer, path, nil); got.status != http.StatusGone {
			t.Errorf("the replaced avatar: %d %s", got.status, got.body)
		}
		if got := n.fetch(t, stranger, path, nil); got.status != http.StatusNotFound {
			t.Errorf("the replaced avatar, to a stranger: %d %s", got.status, got.body)
		}
		if r := n.setMe(t, me, map[string]any{"avatarUploadId": first.UploadID}); r.status != http.StatusGone {
			t.Errorf("a released avatar upload again: %d %s", r.status, r.body)
		}
		// Clearing releases the current one too.
		if r := n.setMe(t, me, map[string]any{"avatarUrl": ""}); r.status != http.StatusOK || decode[chat.Profile](t, r).Avatar != nil {
			t.Fatalf("clear the avatar: %d %s", r.status, r.body)
		}
		if !n.blobQueued(t, unused.UploadID) {
			t.Error("the cleared avatar's blob is not queued for deletion")
		}
		n.sweepNow(t)
		assertNoOrphans(t, n)
		if q := queryCount(t, n, `SELECT count(*) FROM blob_deletion`); q != 0 {
			t.Errorf("%d deletions left", q)
		}
	})
}

func TestAGroupAvatarIsSetByAnAdminAndSeenByEveryCurrentMember(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	const owner, member, admin, later, stranger = 1, 2, 3, 4, 5
	g := mustGroup(t, ctx, n.Server, owner, "g", []int64{member})
	if _, _, err := n.Service.AddMemberAs(ctx, g.ID, owner, admin, chat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf("/v1/conversations/%d", g.ID)
	live := rawClient(t, n.MQTTAddr(), member, "member-live", 5, true)
	sessionLoaded(t, n.Server, "member-live")

	mine := n.avatarUpload(t, member, 48)
	if r := n.call(t, member, "PATCH", patch, map[string]any{"avatarUploadId": mine.UploadID}, nil); r.status != http.StatusForbidden {
		t.Errorf("a plain member sets the group's avatar: %d %s", r.status, r.body)
	}
	// The upload must be the actor's own.
	if r := n.call(t, admin, "PATCH", patch, map[string]any{"avatarUploadId": mine.UploadID}, nil); r.status != http.StatusNotFound {
		t.Errorf("an admin sets another user's upload: %d %s", r.status, r.body)
	}
	up := n.avatarUpload(t, admin, 48)
	r := n.call(t, admin, "PATCH", patch, map[string]any{"avatarUploadId": up.UploadID}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("an admin sets the avatar: %d %s", r.status, r.body)
	}
	path := "/v1/attachments/" + up.UploadID
	if c := decode[chat.Conversation](t, r); c.Avatar == nil || *c.Avatar != path {
		t.Fatalf("conversation avatar %v, want %s", c.Avatar, path)
	}
	var sys, updated map[string]any
	for sys == nil || updated == nil {
		for _, ev := range eventsUntil(t, live, chat.EventConversationUpdated, 10*time.Second) {
			switch ev["type"] {
			case chat.EventSystemNew:
				sys = ev
			case chat.EventConversationUpdated:
				updated = ev
			}
		}
	}
	if updated["avatar"] != path || sys["avatar"] != path {
		t.Errorf("conversation.updated %v, system.new %v: want avatar %s", updated, sys, path)
	}

	// A member added afterwards, in a group whose history is "joined",
	// sees the avatar: it is the group's, not a message before their join.
	if _, _, err := n.Service.AddMemberAs(ctx, g.ID, owner, later, chat.RoleMember); err != nil {
		t.Fatal(err)
	}
	if c, err := n.Service.GetConversation(ctx, g.ID, later); err != nil || c.HistoryVisible != chat.HistoryJoined {
		t.Fatalf("group as the later member sees it: %+v %v", c, err)
	}
	for _, u := range []int64{owner, member, later} {
		if got := n.fetch(t, u, path, nil); got.status != http.StatusOK || hexSHA(got.body) != up.Attachment.SHA256 {
			t.Errorf("member %d fetches the group's avatar: %d %s", u, got.status, got.body)
		}
	}
	if got := n.fetch(t, stranger, path, nil); got.status != http.StatusNotFound {
		t.Errorf("a stranger fetches the group's avatar: %d %s", got.status, got.body)
	}
	if err := n.Service.RemoveMember(ctx, g.ID, owner, later); err != nil {
		t.Fatal(err)
	}
	if got := n.fetch(t, later, path, nil); got.status != http.StatusNotFound {
		t.Errorf("a removed member fetches the group's avatar: %d %s", got.status, got.body)
	}

	// An https avatar replaces it: the upload is released.
	if r := n.call(t, owner, "PATCH", patch, map[string]any{"avatarUrl": "https://example.com/g.png"}, nil); r.status != http.StatusOK {
		t.Fatalf("replace the group's avatar: %d %s", r.status, r.body)
	}
	if !n.blobQueued(t, up.UploadID) {
		t.Error("the replaced group avatar's blob is not queued for deletion")
	}
	if got := n.fetch(t, member, path, nil); got.status != http.StatusGone {
		t.Errorf("the replaced group avatar: %d %s", got.status, got.body)
	}
	n.sweepNow(t)
	assertNoOrphans(t, n)
}

func TestAnAvatarUploadNeverUsedExpiresLikeOtherUploads(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	ctx := context.Background()
	used := n.avatarUpload(t, 1, 40)
	unused := n.avatarUpload(t, 1, 40)
	if r := n.setMe(t, 1, map[string]any{"avatarUploadId": used.UploadID}); r.status != http.StatusOK {
		t.Fatalf("PUT /v1/me: %d %s", r.status, r.body)
	}
	// A day later (upload_ttl 24h) the unused one goes with its blob; the
	// avatar stays.
	if _, err := n.Pool.Exec(ctx, `UPDATE attachment SET created_at = created_at - interval '25 hours',
		url_expires_at = url_expires_at - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	n.Attachments.Sweep()
	if n.uploadRow(t, unused.UploadID) != 0 {
		t.Error("the unused avatar upload survived its TTL")
	}
	if n.uploadRow(t, used.UploadID) != 1 {
		t.Error("the avatar in use expired")
	}
	if r := n.setMe(t, 1, map[string]any{"avatarUploadId": unused.UploadID}); r.status != http.StatusNotFound {
		t.Errorf("an expired avatar upload: %d %s", r.status, r.body)
	}
	n.sweepNow(t)
	assertNoOrphans(t, n)
	if got := n.fetch(t, 1, "/v1/attachments/"+used.UploadID, nil); got.status != http.StatusOK {
		t.Errorf("the avatar after the sweep: %d %s", got.status, got.body)
	}
}
