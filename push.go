package chat

import (
	"context"
	"time"
)

// Push platforms a device registers with. Web Push and UnifiedPush
// subscriptions are sent to by chatd itself (RFC 8030/8291/8292); FCM and
// APNs tokens are handed to the operator's sender (Kafka chat.push or a
// signed webhook), which holds those services' credentials.
const (
	PlatformWebPush     = "webpush"
	PlatformUnifiedPush = "unifiedpush"
	PlatformFCM         = "fcm"
	PlatformAPNs        = "apns"
)

// MaxDevicesPerUser is how many devices a user keeps; registering one more
// forgets the one registered (or re-registered) longest ago.
const MaxDevicesPerUser = 20

// DeviceKeys are a Web Push subscription's keys (PushSubscription.toJSON),
// base64url.
type DeviceKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// DeviceRequest registers a device: a token (fcm, apns) or an endpoint
// with keys (webpush, unifiedpush).
type DeviceRequest struct {
	Platform string      `json:"platform"`
	Token    string      `json:"token,omitempty"`
	Endpoint string      `json:"endpoint,omitempty"`
	Keys     *DeviceKeys `json:"keys,omitempty"`
	AppID    string      `json:"appId,omitempty"`
	Locale   string      `json:"locale,omitempty"`
}

// Device is a registered push target of the caller. Keys are never shown.
type Device struct {
	ID        int64     `json:"id"`
	Platform  string    `json:"platform"`
	Token     string    `json:"token,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	AppID     string    `json:"appId"`
	Locale    string    `json:"locale"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// ConversationSettings are one member's settings of a conversation.
// Muted silences pushes until MutedUntil (nil: until unmuted); in a muted
// group, Mentions (default true) still pushes messages that mention the
// member.
type ConversationSettings struct {
	Muted      bool       `json:"muted"`
	MutedUntil *time.Time `json:"mutedUntil"`
	Mentions   bool       `json:"mentions"`
}

// AsOf is s as it stands at now: a mute whose MutedUntil has passed is
// over (muted false, mutedUntil null), as the push decider reads it.
func (s ConversationSettings) AsOf(now time.Time) ConversationSettings {
	if s.Muted && s.MutedUntil != nil && !s.MutedUntil.After(now) {
		s.Muted, s.MutedUntil = false, nil
	}
	return s
}

// DefaultConversationSettings are a member's settings until they set any.
var DefaultConversationSettings = ConversationSettings{Mentions: true}

// SettingsRequest is PUT /v1/conversations/{id}/settings: omitted fields
// take their defaults (muted false, or true when mutedUntil is given;
// mentions true).
type SettingsRequest struct {
	Muted      *bool      `json:"muted"`
	MutedUntil *time.Time `json:"mutedUntil"`
	Mentions   *bool      `json:"mentions"`
}

// Settings resolves the request's defaults.
func (r SettingsRequest) Settings() ConversationSettings {
	s := DefaultConversationSettings
	s.MutedUntil = r.MutedUntil
	s.Muted = r.MutedUntil != nil
	if r.Muted != nil {
		s.Muted = *r.Muted
	}
	if !s.Muted {
		s.MutedUntil = nil
	}
	if r.Mentions != nil {
		s.Mentions = *r.Mentions
	}
	return s
}

// PushStore keeps devices and member settings (package push).
type PushStore interface {
	// RegisterDevice validates and stores d for userID; a token or
	// endpoint already registered (by anyone) is updated and moves to
	// userID. created is false for such an update. issuedAt is when the
	// caller's token was issued (nil: the caller was not authenticated
	// by a token): when TokenRevoked says a revocation of userID's tokens
	// refuses it, nothing is stored and the error is ErrTokenRevoked.
	// The check and the write are serialised with RevokeTokens, which
	// forgets the user's devices: a device is either refused, or stored
	// before the revocation and forgotten by it.
	RegisterDevice(ctx context.Context, userID int64, d DeviceRequest, issuedAt *time.Time) (id int64, created bool, err error)
	Devices(ctx context.Context, userID int64) ([]Device, error)
	// DeleteDevice is not_found unless id is one of userID's devices.
	DeleteDevice(ctx context.Context, userID, id int64) error
	// SetSettings is not_found for an unknown conversation, not_member
	// unless userID is a member.
	SetSettings(ctx context.Context, conversationID, userID int64, s ConversationSettings) (ConversationSettings, error)
	// Settings returns userID's settings of the given conversations
	// (defaults for those never set).
	Settings(ctx context.Context, userID int64, conversationIDs []int64) (map[int64]ConversationSettings, error)
	// VAPIDPublicKey is the server's VAPID public key, base64url
	// (uncompressed P-256 point), the applicationServerKey of browsers.
	VAPIDPublicKey() string
}

// VAPIDKey is GET /v1/push/vapid.
type VAPIDKey struct {
	PublicKey string `json:"publicKey"`
}

func (s *Service) pushStore() (PushStore, error) {
	if s.Push == nil {
		return nil, Errorf(CodeNotFound, "push is not available on this server")
	}
	return s.Push, nil
}

// RegisterDevice stores a push target of userID. A caller authenticated
// by a token (WithTokenIssuedAt) whose user revoked it since the call was
// authenticated gets ErrTokenRevoked, and no device: the revocation
// forgot the user's devices, and a stolen phone must not register one
// back with the token it was signed in with.
func (s *Service) RegisterDevice(ctx context.Context, userID int64, d DeviceRequest) (int64, bool, error) {
	p, err := s.pushStore()
	if err != nil {
		return 0, false, err
	}
	var issuedAt *time.Time
	if t, ok := TokenIssuedAt(ctx); ok {
		issuedAt = &t
	}
	return p.RegisterDevice(ctx, userID, d, issuedAt)
}

// Devices lists userID's devices, most recently registered first.
func (s *Service) Devices(ctx context.Context, userID int64) ([]Device, error) {
	p, err := s.pushStore()
	if err != nil {
		return nil, err
	}
	return p.Devices(ctx, userID)
}

// DeleteDevice forgets one of userID's devices.
func (s *Service) DeleteDevice(ctx context.Context, userID, id int64) error {
	if err := ValidateID("id", id); err != nil {
		return err
	}
	p, err := s.pushStore()
	if err != nil {
		return err
	}
	return p.DeleteDevice(ctx, userID, id)
}

// VAPIDPublicKey answers GET /v1/push/vapid.
func (s *Service) VAPIDPublicKey() (VAPIDKey, error) {
	p, err := s.pushStore()
	if err != nil {
		return VAPIDKey{}, err
	}
	return VAPIDKey{PublicKey: p.VAPIDPublicKey()}, nil
}

// SetConversationSettings replaces userID's settings of a conversation.
func (s *Service) SetConversationSettings(ctx context.Context, conversationID, userID int64, r SettingsRequest) (ConversationSettings, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return ConversationSettings{}, err
	}
	p, err := s.pushStore()
	if err != nil {
		return ConversationSettings{}, err
	}
	st := r.Settings()
	if st.Muted && st.MutedUntil != nil && !st.MutedUntil.After(time.Now()) {
		return ConversationSettings{}, Errorf(CodeInvalid, "mutedUntil %s has passed: give a time to come, null to mute until unmuted, or muted false to unmute",
			st.MutedUntil.UTC().Format(time.RFC3339))
	}
	// RFC 3339 lets an offset carry the last day of 9999 into the year
	// 10000 in UTC, which no JSON answer can hold: stored, it would fail
	// every answer that shows it (this one, the inbox).
	if st.Muted && st.MutedUntil != nil && st.MutedUntil.UTC().Year() > 9999 {
		return ConversationSettings{}, Errorf(CodeInvalid, "mutedUntil must be before 10000-01-01T00:00:00Z; null mutes until unmuted")
	}
	return p.SetSettings(ctx, conversationID, userID, st)
}

// AddInboxSettings fills the Settings of every entry of page (nothing
// without a PushStore).
func (s *Service) AddInboxSettings(ctx context.Context, userID int64, page *InboxPage) error {
	if s.Push == nil || len(page.Conversations) == 0 {
		return nil
	}
	ids := make([]int64, len(page.Conversations))
	for i, e := range page.Conversations {
		ids[i] = e.ID
	}
	m, err := s.Push.Settings(ctx, userID, ids)
	if err != nil {
		return err
	}
	now := time.Now()
	for i := range page.Conversations {
		st := DefaultConversationSettings
		if v, ok := m[page.Conversations[i].ID]; ok {
			st = v.AsOf(now)
		}
		page.Conversations[i].Settings = &st
	}
	return nil
}
