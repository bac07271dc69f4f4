package client_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/media/mediatest"
	"github.com/chatd/chatd/internal/pgtest"
)

func TestAnAvatarIsUploadedSetAndDownloadedWithTheClient(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t))
	g := groupOf12(t, srv)
	api := "http://" + srv.HTTPAddr()
	alice, bob, eve := connectHTTP(t, srv, 1, api), connectHTTP(t, srv, 2, api), connectHTTP(t, srv, 3, api)
	ctx := ctxFor(t, 30*time.Second)

	a, err := alice.UploadAvatar(ctx, "me.png", bytes.NewReader(mediatest.PNG(80, 80)))
	if err != nil || a.ContentType != "image/png" {
		t.Fatalf("avatar upload: %+v %v", a, err)
	}
	p, err := alice.SetProfile(ctx, client.ProfileUpdate{DisplayName: "Alice", AvatarUploadID: &a.ID})
	if err != nil || p.Avatar == nil || *p.Avatar != "/v1/attachments/"+a.ID {
		t.Fatalf("set profile: %+v %v", p, err)
	}
	seen, err := bob.User(ctx, 1)
	if err != nil || seen.Avatar == nil {
		t.Fatalf("bob reads alice: %+v %v", seen, err)
	}
	var buf bytes.Buffer
	if info, err := bob.DownloadAvatar(ctx, *seen.Avatar, false, &buf); err != nil || info.Size != a.Size {
		t.Fatalf("bob downloads alice's avatar: %+v %v", info, err)
	}
	if _, err := eve.DownloadAvatar(ctx, *seen.Avatar, false, io.Discard); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a stranger downloads alice's avatar: %v", err)
	}
	// A used upload is refused for the group; a new one is taken.
	var ce *client.Error
	if _, err := alice.UpdateGroup(ctx, g.ID, client.GroupUpdate{AvatarUploadID: &a.ID}); !errors.As(err, &ce) || ce.Code != "conflict" {
		t.Fatalf("a used avatar upload for the group: %v", err)
	}
	ga, err := alice.UploadAvatar(ctx, "g.jpg", bytes.NewReader(mediatest.JPEG(60, 40)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := alice.UpdateGroup(ctx, g.ID, client.GroupUpdate{AvatarUploadID: &ga.ID})
	if err != nil || c.Avatar == nil {
		t.Fatalf("group avatar: %+v %v", c, err)
	}
	if _, err := bob.DownloadAvatar(ctx, *c.Avatar, true, io.Discard); err != nil {
		t.Fatalf("bob downloads the group avatar's thumbnail: %v", err)
	}
	if _, err := bob.DownloadAvatar(ctx, "https://example.com/a.png", false, io.Discard); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an https avatar: %v", err)
	}
	// Replaced: the avatar bob read is gone at once, not retried.
	b, err := alice.UploadAvatar(ctx, "me2.png", bytes.NewReader(mediatest.PNG(40, 40)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SetProfile(ctx, client.ProfileUpdate{DisplayName: "Alice", AvatarUploadID: &b.ID}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := bob.DownloadAvatar(ctx, *seen.Avatar, false, io.Discard); !errors.Is(err, client.ErrGone) || time.Since(start) > 5*time.Second {
		t.Fatalf("bob downloads alice's replaced avatar: %v after %s", err, time.Since(start))
	}
}
