package client

import (
	"context"
	"errors"

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

type (
	// DeviceRegistration is where chatd or the operator's sender pushes:
	// Platform webpush or unifiedpush with Endpoint and Keys (a
	// PushSubscription, subscribed with VAPIDPublicKey), or fcm or apns
	// with Token; AppID and Locale are optional and passed on.
	DeviceRegistration = chat.DeviceRequest
	// DeviceKeys are a Web Push subscription's keys, base64url.
	DeviceKeys = chat.DeviceKeys
	// Device is one of the caller's registered devices; keys are never
	// shown.
	Device = chat.Device
)

// Push platforms of DeviceRegistration.Platform.
const (
	PlatformWebPush     = chat.PlatformWebPush
	PlatformUnifiedPush = chat.PlatformUnifiedPush
	PlatformFCM         = chat.PlatformFCM
	PlatformAPNs        = chat.PlatformAPNs
)

// RegisterDevice registers where the user's app is woken while it is not
// connected (RPC device.register) and returns the device's id; created is
// false when the token or endpoint was registered already (it is updated
// and now the caller's, the same id). Re-sent after a lost reply, so such
// a retry may say created false for a device this call created. A user
// keeps at most 20 devices: one more forgets the one registered longest
// ago. ErrInvalid for a malformed device, an endpoint that is not https
// on a public address, or an fcm or apns token on a server with no sender
// for them.
func (c *Client) RegisterDevice(ctx context.Context, d DeviceRegistration) (id int64, created bool, err error) {
	var reply struct {
		Status int   `json:"status"`
		ID     int64 `json:"id"`
	}
	err = c.call(ctx, "device.register", d, &reply, true)
	return reply.ID, reply.Status == 201, err
}

// Devices lists the caller's devices, most recently registered first
// (RPC device.list).
func (c *Client) Devices(ctx context.Context) ([]Device, error) {
	var reply struct {
		Devices []Device `json:"devices"`
	}
	err := c.call(ctx, "device.list", struct{}{}, &reply, true)
	return reply.Devices, err
}

// DeleteDevice stops pushes to one of the caller's devices (RPC
// device.delete): call it on sign-out. ErrNotFound for an id that is not
// one of theirs (or deleted already). When the connection drops before
// the reply it is asked again, and ErrNotFound then is the success it
// stands for: the device is gone (device ids are never reused).
func (c *Client) DeleteDevice(ctx context.Context, id int64) error {
	params := struct {
		ID int64 `json:"id"`
	}{id}
	err := c.call(ctx, "device.delete", params, nil, false)
	if !errors.Is(err, errConnectionLost) {
		return err
	}
	if err := c.call(ctx, "device.delete", params, nil, true); !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// VAPIDPublicKey returns chatd's VAPID public key (RPC push.vapid), the
// uncompressed P-256 point, base64url: the applicationServerKey a Web Push
// subscription for RegisterDevice is made with. Every node answers the
// same.
func (c *Client) VAPIDPublicKey(ctx context.Context) (string, error) {
	k, err := callFor[chat.VAPIDKey](ctx, c, "push.vapid", struct{}{}, true)
	return k.PublicKey, err
}
