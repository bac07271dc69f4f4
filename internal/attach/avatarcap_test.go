package attach

import (
	"context"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// An avatar is shown small to everyone who sees the profile: its upload
// is refused at the ticket above max_avatar_bytes (10 MiB by default),
// with a message that says an avatar's limit, while a message's file of
// the same size is accepted.
func TestAnAvatarUploadOverTheAvatarLimitIsRefusedAtTheTicket(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	s, err := New(Config{Store: store.NewAttachments(pool), Blobs: local})
	if err != nil {
		t.Fatal(err)
	}
	const over = 10<<20 + 1
	_, err = s.CreateUpload(ctx, chat.UploadRequest{Purpose: chat.PurposeAvatar, UserID: 1, Name: "me.jpg", ContentType: "image/jpeg", Size: over})
	if chat.ErrorCode(err) != chat.CodeTooLarge || !strings.Contains(err.Error(), "an avatar is at most 10.0 MiB") {
		t.Fatalf("avatar of 10 MiB + 1: %v, want too_large saying an avatar's limit", err)
	}
	if _, err := s.CreateUpload(ctx, chat.UploadRequest{Purpose: chat.PurposeAvatar, UserID: 1, Name: "me.jpg", ContentType: "image/jpeg", Size: 10 << 20}); err != nil {
		t.Fatalf("avatar of 10 MiB: %v", err)
	}
	if _, err := s.CreateUpload(ctx, chat.UploadRequest{ConversationID: g.ID, UserID: 1, Name: "big.jpg", ContentType: "image/jpeg", Size: over}); err != nil {
		t.Fatalf("a message's file of 10 MiB + 1: %v", err)
	}

	// Set lower, and never above max_upload_bytes.
	small, err := New(Config{Store: store.NewAttachments(pool), Blobs: local, Limits: chat.UploadLimits{MaxAvatarBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.CreateUpload(ctx, chat.UploadRequest{Purpose: chat.PurposeAvatar, UserID: 1, Name: "me.jpg", ContentType: "image/jpeg", Size: 1<<20 + 1}); chat.ErrorCode(err) != chat.CodeTooLarge {
		t.Fatalf("avatar over a max_avatar_bytes of 1 MiB: %v, want too_large", err)
	}
	tiny, err := New(Config{Store: store.NewAttachments(pool), Blobs: local, Limits: chat.UploadLimits{MaxBytes: 1000, MaxAvatarBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tiny.CreateUpload(ctx, chat.UploadRequest{Purpose: chat.PurposeAvatar, UserID: 1, Name: "me.jpg", ContentType: "image/jpeg", Size: 1001}); chat.ErrorCode(err) != chat.CodeTooLarge {
		t.Fatalf("avatar over a max_upload_bytes of 1000 (max_avatar_bytes 1 MiB): %v, want too_large", err)
	}
}

// A file just over the limit is told apart from it: one byte over 25 MiB
// reads "25.0 MiB (26214401 bytes)", not "25.0 MiB, the limit is 25.0
// MiB", for a message's file as for an avatar.
func TestARefusalOfAFileJustOverTheLimitSaysHowMuchOver(t *testing.T) {
	_, pool, g, local := groupAndDisk(t)
	ctx := context.Background()
	s, err := New(Config{Store: store.NewAttachments(pool), Blobs: local})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  chat.UploadRequest
		want string
	}{
		{chat.UploadRequest{ConversationID: g.ID, UserID: 1, Name: "big.jpg", ContentType: "image/jpeg", Size: 25<<20 + 1},
			"the file is 25.0 MiB (26214401 bytes), the limit is 25.0 MiB (26214400 bytes)"},
		{chat.UploadRequest{ConversationID: g.ID, UserID: 1, Name: "big.jpg", ContentType: "image/jpeg", Size: 30 << 20},
			"the file is 30.0 MiB, the limit is 25.0 MiB"},
		{chat.UploadRequest{Purpose: chat.PurposeAvatar, UserID: 1, Name: "me.jpg", ContentType: "image/jpeg", Size: 10<<20 + 1},
			"the picture is 10.0 MiB (10485761 bytes), an avatar is at most 10.0 MiB (10485760 bytes)"},
	} {
		_, err := s.CreateUpload(ctx, c.req)
		if chat.ErrorCode(err) != chat.CodeTooLarge || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d bytes: %v, want too_large saying %q", c.req.Size, err, c.want)
		}
	}
}
