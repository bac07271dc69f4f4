package client_test

import (
	"errors"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
)

func boolp(b bool) *bool { return &b }

// A conversation's mute over the Go client: the settings set are answered
// and shown by the inbox, an unmute puts the defaults back, a
// non-member's is ErrNotMember and a mute that ended already ErrInvalid.
func TestConversationSettingsOverTheGoClient(t *testing.T) {
	_, broker, a, conv := sender(t)
	stranger := connect(t, testConfig(t, broker, 3))
	ctx := ctxFor(t, 30*time.Second)

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	st, err := a.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{MutedUntil: &until, Mentions: boolp(false)})
	if err != nil || !st.Muted || st.Mentions || st.MutedUntil == nil || !st.MutedUntil.Equal(until) {
		t.Fatalf("mute until %v: %+v, %v", until, st, err)
	}
	page, err := a.Inbox(ctx, client.InboxOptions{})
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].Settings == nil || !page.Conversations[0].Settings.Muted {
		t.Fatalf("the inbox's settings of a muted conversation: %+v, %v", page, err)
	}
	st, err = a.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{Muted: boolp(false)})
	if err != nil || st != chat.DefaultConversationSettings {
		t.Fatalf("unmute: %+v, %v", st, err)
	}

	if _, err := stranger.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{Muted: boolp(true)}); !errors.Is(err, client.ErrNotMember) {
		t.Fatalf("a non-member mutes: %v, want ErrNotMember", err)
	}
	past := time.Now().Add(-time.Minute)
	_, err = a.SetConversationSettings(ctx, conv, client.ConversationSettingsUpdate{MutedUntil: &past})
	var ce *client.Error
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &ce) || ce.Code != "invalid" {
		t.Fatalf("a mute that ended: %v, want ErrInvalid (invalid)", err)
	}
}
