package client

import (
	"context"

	chat "github.com/chatd/chatd"
)

// Conversation settings and push devices (docs/http.md "PUT
// /v1/conversations/{id}/settings" and the device routes after it): what
// wakes an app that is not connected, and what is silenced.

type (
	// ConversationSettings are the caller's own settings of a
	// conversation: Muted silences its pushes until MutedUntil (nil:
	// until unmuted); in a muted group, Mentions (default true) still
	// pushes a message that mentions the caller. Muting only silences
	// pushes: messages, unread counts and events are as before.
	ConversationSettings = chat.ConversationSettings
	// ConversationSettingsUpdate replaces the settings: a nil field takes
	// its default (Muted false, or true when MutedUntil is given;
	// Mentions true). A MutedUntil that has passed is refused.
	ConversationSettingsUpdate = chat.SettingsRequest
)

// SetConversationSettings replaces the caller's settings of a conversation
// they are a member of (RPC conversation.settings) and returns them;
// ErrNotMember otherwise, ErrInvalid for a MutedUntil that has passed.
// Idempotent. The inbox shows them (InboxEntry.Settings); leaving the
// conversation forgets them.
func (c *Client) SetConversationSettings(ctx context.Context, conversationID int64, u ConversationSettingsUpdate) (ConversationSettings, error) {
	params := struct {
		ConversationID int64 `json:"conversationId"`
		ConversationSettingsUpdate
	}{conversationID, u}
	return callFor[ConversationSettings](ctx, c, "conversation.settings", params, true)
}
