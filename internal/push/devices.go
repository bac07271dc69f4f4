package push

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgerr"
)

// Limits of a device registration.
const (
	maxAddressBytes = 2048 // FCM tokens are ~160 bytes, endpoints ~250, APNs 64
	maxAppIDBytes   = 255
	maxLocaleBytes  = 35 // BCP 47 language tags in practice
)

// Devices implements chat.PushStore on PostgreSQL: devices and member
// settings. Safe for concurrent use.
type Devices struct {
	pool      *pgxpool.Pool
	allowHTTP bool
	handOff   bool // an FCM/APNs sender is configured
	vapidPub  string
}

// NewDevices returns the device store. allowHTTP accepts http:// Web Push
// endpoints; handOff says FCM and APNs tokens can be delivered (without it
// registering one is refused: it would never be pushed to).
func NewDevices(pool *pgxpool.Pool, vapidPublicKey string, allowHTTP, handOff bool) *Devices {
	return &Devices{pool: pool, allowHTTP: allowHTTP, handOff: handOff, vapidPub: vapidPublicKey}
}

// VAPIDPublicKey implements chat.PushStore.
func (d *Devices) VAPIDPublicKey() string { return d.vapidPub }

func invalid(format string, args ...any) error { return chat.Errorf(chat.CodeInvalid, format, args...) }

// validate checks r and returns the address it registers.
func (d *Devices) validate(r *chat.DeviceRequest) (string, error) {
	r.Platform = strings.ToLower(strings.TrimSpace(r.Platform))
	// An app id is a bundle id or project name: no control character,
	// and NUL, which PostgreSQL text cannot hold, must not reach it.
	if len(r.AppID) > maxAppIDBytes || !utf8.ValidString(r.AppID) || strings.ContainsFunc(r.AppID, unicode.IsControl) {
		return "", invalid("appId must be valid UTF-8 of at most %d bytes without control characters", maxAppIDBytes)
	}
	if len(r.Locale) > maxLocaleBytes || strings.ContainsFunc(r.Locale, func(c rune) bool {
		return !(c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
	}) {
		return "", invalid("locale must be a language tag such as en or pt-BR")
	}
	switch r.Platform {
	case chat.PlatformWebPush, chat.PlatformUnifiedPush:
		if r.Token != "" {
			return "", invalid("%s devices register an endpoint and keys, not a token", r.Platform)
		}
		if err := d.validEndpoint(r.Endpoint); err != nil {
			return "", err
		}
		if r.Keys == nil {
			return "", invalid(`%s devices need keys {"p256dh","auth"} (PushSubscription.toJSON())`, r.Platform)
		}
		pub, err := decodeB64(r.Keys.P256dh)
		if err != nil {
			return "", invalid("keys.p256dh is not base64url")
		}
		if _, err := ecdh.P256().NewPublicKey(pub); err != nil {
			return "", invalid("keys.p256dh is not an uncompressed P-256 public key (65 bytes)")
		}
		auth, err := decodeB64(r.Keys.Auth)
		if err != nil || len(auth) != 16 {
			return "", invalid("keys.auth must be 16 bytes, base64url")
		}
		return r.Endpoint, nil
	case chat.PlatformFCM, chat.PlatformAPNs:
		if r.Endpoint != "" || r.Keys != nil {
			return "", invalid("%s devices register a token, not an endpoint", r.Platform)
		}
		if r.Token == "" || len(r.Token) > maxAddressBytes || strings.ContainsFunc(r.Token, func(c rune) bool { return c <= ' ' || c > '~' }) {
			return "", invalid("token must be 1 to %d printable ASCII characters", maxAddressBytes)
		}
		if !d.handOff {
			return "", invalid("this server hands no %s pushes to a sender (push_kafka_topic with Kafka, or push_webhook_url); register a webpush or unifiedpush device", r.Platform)
		}
		return r.Token, nil
	default:
		return "", invalid(`platform must be "webpush", "unifiedpush", "fcm" or "apns"`)
	}
}

func (d *Devices) validEndpoint(e string) error {
	if e == "" || len(e) > maxAddressBytes {
		return invalid("endpoint must be a URL of at most %d bytes", maxAddressBytes)
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return invalid("endpoint is not an absolute URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && d.allowHTTP:
	default:
		return invalid("endpoint must be an https:// URL")
	}
	return nil
}

func decodeB64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// userLock serialises one user's registrations, so the device cap holds,
// and each with a revocation of the user's tokens (store RevokeTokens).
const userLock = `SELECT chat_lock_user_devices($1)`

// RegisterDevice implements chat.PushStore. The revocation is read under
// userLock, in a statement after the lock is granted: a revocation that
// committed while the registration waited for it is seen.
func (d *Devices) RegisterDevice(ctx context.Context, userID int64, r chat.DeviceRequest, issuedAt *time.Time) (int64, bool, error) {
	addr, err := d.validate(&r)
	if err != nil {
		return 0, false, err
	}
	var keys chat.DeviceKeys
	if r.Keys != nil {
		keys = *r.Keys
	}
	var (
		id      int64
		created bool
	)
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, userLock, userID); err != nil {
			return err
		}
		if issuedAt != nil {
			var before time.Time
			err := tx.QueryRow(ctx, `SELECT revoked_before FROM token_revocation WHERE user_id = $1`, userID).Scan(&before)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if chat.TokenRevoked(before, *issuedAt) {
				return chat.ErrTokenRevoked
			}
		}
		// xmax = 0 tells an inserted row from an updated one.
		if err := tx.QueryRow(ctx, `
INSERT INTO push_device (user_id, platform, address, p256dh, auth, app_id, locale)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (platform, address) DO UPDATE
SET user_id = EXCLUDED.user_id, p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth,
    app_id = EXCLUDED.app_id, locale = EXCLUDED.locale, updated_at = now()
RETURNING id, xmax = 0`, userID, r.Platform, addr, keys.P256dh, keys.Auth, r.AppID, r.Locale).Scan(&id, &created); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
DELETE FROM push_device WHERE id IN (
    SELECT id FROM push_device WHERE user_id = $1 ORDER BY updated_at DESC, id DESC OFFSET $2)`,
			userID, chat.MaxDevicesPerUser)
		return err
	})
	if errors.Is(err, chat.ErrTokenRevoked) {
		return 0, false, err
	}
	if err != nil {
		return 0, false, dbErr("register device", err)
	}
	return id, created, nil
}

// Devices implements chat.PushStore.
func (d *Devices) Devices(ctx context.Context, userID int64) ([]chat.Device, error) {
	rows, err := d.pool.Query(ctx, `
SELECT id, platform, address, app_id, locale, created_at, updated_at
FROM push_device WHERE user_id = $1 ORDER BY updated_at DESC, id DESC`, userID)
	if err != nil {
		return nil, dbErr("list devices", err)
	}
	out := []chat.Device{}
	for rows.Next() {
		var (
			dv   chat.Device
			addr string
		)
		if err := rows.Scan(&dv.ID, &dv.Platform, &addr, &dv.AppID, &dv.Locale, &dv.CreatedAt, &dv.UpdatedAt); err != nil {
			return nil, dbErr("list devices", err)
		}
		if isWebPush(dv.Platform) {
			dv.Endpoint = addr
		} else {
			dv.Token = addr
		}
		out = append(out, dv)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list devices", err)
	}
	return out, nil
}

// DeleteDevice implements chat.PushStore.
func (d *Devices) DeleteDevice(ctx context.Context, userID, id int64) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM push_device WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return dbErr("delete device", err)
	}
	if tag.RowsAffected() == 0 {
		return chat.Errorf(chat.CodeNotFound, "no such device")
	}
	return nil
}

// SetSettings implements chat.PushStore.
func (d *Devices) SetSettings(ctx context.Context, conversationID, userID int64, s chat.ConversationSettings) (chat.ConversationSettings, error) {
	// The member row is locked (KEY SHARE): a removal deleting it and
	// not yet committed is waited for, and then the row is gone and
	// nothing is written. Read without the lock, the row the removal was
	// deleting would let the settings be written after the removal's
	// trigger forgot them, to mute the conversation again once the user
	// is added back.
	tag, err := d.pool.Exec(ctx, `
INSERT INTO member_settings (conversation_id, user_id, muted, muted_until, mentions)
SELECT conversation_id, user_id, $3, $4, $5 FROM conversation_member
WHERE conversation_id = $1 AND user_id = $2
FOR KEY SHARE
ON CONFLICT (conversation_id, user_id) DO UPDATE
SET muted = EXCLUDED.muted, muted_until = EXCLUDED.muted_until, mentions = EXCLUDED.mentions`,
		conversationID, userID, s.Muted, s.MutedUntil, s.Mentions)
	if err != nil {
		return chat.ConversationSettings{}, dbErr("save conversation settings", err)
	}
	if tag.RowsAffected() == 0 {
		// Told apart as every conversation route tells them: an id
		// that names no conversation is not_found.
		var exists bool
		if err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conversation WHERE id = $1)`, conversationID).Scan(&exists); err != nil {
			return chat.ConversationSettings{}, dbErr("read conversation", err)
		}
		if !exists {
			return chat.ConversationSettings{}, chat.NoConversation(conversationID)
		}
		return chat.ConversationSettings{}, chat.NotMemberOf(conversationID)
	}
	if s.MutedUntil != nil {
		t := s.MutedUntil.UTC().Truncate(time.Microsecond)
		s.MutedUntil = &t
	}
	return s, nil
}

// Settings implements chat.PushStore.
func (d *Devices) Settings(ctx context.Context, userID int64, ids []int64) (map[int64]chat.ConversationSettings, error) {
	rows, err := d.pool.Query(ctx, `
SELECT conversation_id, muted, muted_until, mentions FROM member_settings
WHERE user_id = $1 AND conversation_id = ANY($2)`, userID, ids)
	if err != nil {
		return nil, dbErr("read conversation settings", err)
	}
	out := map[int64]chat.ConversationSettings{}
	for rows.Next() {
		var (
			id int64
			s  chat.ConversationSettings
		)
		if err := rows.Scan(&id, &s.Muted, &s.MutedUntil, &s.Mentions); err != nil {
			return nil, dbErr("read conversation settings", err)
		}
		out[id] = s
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read conversation settings", err)
	}
	return out, nil
}

func isWebPush(platform string) bool {
	return platform == chat.PlatformWebPush || platform == chat.PlatformUnifiedPush
}

// dbErr is the store's rule for a database failure (pgerr.Classify): an
// outage is unavailable (retry), a value the database cannot hold is
// invalid, and anything else a bug (internal), which a client must not be
// told to retry.
func dbErr(verb string, err error) error { return pgerr.Classify(verb, err) }
