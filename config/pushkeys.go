package config

import (
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"strings"
	"time"
)

// PushSettings are the settings of the push hand-off (part of Settings).
type PushSettings struct {
	PushDelay       time.Duration // push_delay: how long a message may wait for a PUBACK before it is pushed
	PushMinInterval time.Duration // push_min_interval: at most one push per (user, conversation) this often
	PushPreview     bool          // push_preview: pushes carry the message text
	PushTimeout     time.Duration // push_timeout: deadline of one request to a push service
	PushQueueSize   int           // push_queue_size: pushes a node holds in memory
	PushKafkaTopic  string        // push_kafka_topic: FCM/APNs hand-off topic (with kafka_brokers); "" = none
	PushWebhookURL  string        // push_webhook_url: FCM/APNs hand-off webhook; "" = none
	// PushWebhookSecret signs webhook requests (X-Chat-Signature).
	PushWebhookSecret string
	// VAPIDPrivateKey is the base64url P-256 private key; "" uses the one
	// kept in <data_dir>/vapid.key.
	VAPIDPrivateKey string
	VAPIDSubject    string // vapid_subject: contact of the VAPID JWT (mailto: or https:)
	PushAllowHTTP   bool   // push_allow_http: accept http:// and private-network Web Push endpoints
}

// MinWebhookSecretBytes is the shortest accepted push_webhook_secret.
const MinWebhookSecretBytes = 32

// pushKeys follow the ops keys in documentation order.
var pushKeys = []*key{
	mk("push_delay", "2s", "a message no session of a recipient acknowledged (PUBACK) within this long is pushed to the recipient's devices",
		"use a positive Go duration such as 2s or 500ms",
		func(s *Settings, v string) (err error) { s.PushDelay, err = parseDuration(v); return }),
	mk("push_min_interval", "10s", "at most one push per user and conversation this often; the next one carries the count",
		"use a positive Go duration such as 10s or 1m",
		func(s *Settings, v string) (err error) { s.PushMinInterval, err = parseDuration(v); return }),
	boolKey(mk("push_preview", "false", "pushes carry the message text (body); false keeps the text off push services",
		"use true or false",
		func(s *Settings, v string) (err error) { s.PushPreview, err = parseBool(v); return })),
	mk("push_timeout", "10s", "deadline of one request to a push service, webhook or Kafka",
		"use a positive Go duration such as 10s",
		func(s *Settings, v string) (err error) { s.PushTimeout, err = parseDuration(v); return }),
	mk("push_queue_size", "1000", "pushes one node holds in memory; more wait in PostgreSQL",
		"use a whole number between 1 and 1000000, e.g. 1000",
		func(s *Settings, v string) (err error) { s.PushQueueSize, err = parseInt(v, 1, 1000000); return }),
	mk("push_kafka_topic", "chat.push", `Kafka topic of FCM/APNs push requests (with kafka_brokers); "" = none`,
		"use letters, digits, '.', '_' and '-' (at most 249), or leave it empty",
		func(s *Settings, v string) error {
			if v != "" && !kafkaTopicRE.MatchString(v) {
				return errors.New("is not a valid Kafka topic name")
			}
			s.PushKafkaTopic = v
			return nil
		}),
	urlKey("push_webhook_url", `URL that FCM/APNs push requests are POSTed to, signed with push_webhook_secret; "" = none`,
		"use an http:// or https:// URL such as https://pusher.internal/v1/push, or leave it empty",
		"an http:// or https:// URL", func(s *Settings) *string { return &s.PushWebhookURL }, "https", "http"),
	secretKey(mk("push_webhook_secret", "", "HMAC-SHA256 key of the X-Chat-Signature header of webhook requests",
		"use at least 32 bytes, e.g. the output of `openssl rand -hex 32`",
		func(s *Settings, v string) error {
			if v != "" && len(v) < MinWebhookSecretBytes {
				return errors.New("is shorter than 32 bytes")
			}
			s.PushWebhookSecret = v
			return nil
		})),
	secretKey(mk("vapid_private_key", "", `VAPID private key (base64url P-256 scalar, as web-push tools print it); "" uses the one kept in <data_dir>/vapid.key`,
		"use the 43-character base64url private key of a P-256 VAPID key pair (npx web-push generate-vapid-keys), or leave it empty",
		func(s *Settings, v string) error {
			v = strings.TrimSpace(v)
			if v != "" {
				raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(v, "="))
				if err != nil {
					return errors.New("is not base64url")
				}
				if _, err := ecdh.P256().NewPrivateKey(raw); err != nil {
					return errors.New("is not a P-256 private key (32 bytes)")
				}
			}
			s.VAPIDPrivateKey = v
			return nil
		})),
	mk("vapid_subject", "mailto:push@localhost", "contact push services may write to about this server's pushes (mailto: or https: URL)",
		"use mailto:you@example.com or https://example.com/contact",
		func(s *Settings, v string) error {
			v = strings.TrimSpace(v)
			if !strings.HasPrefix(v, "mailto:") && !strings.HasPrefix(v, "https://") {
				return errors.New("is not a mailto: or https:// URL")
			}
			s.VAPIDSubject = v
			return nil
		}),
	boolKey(mk("push_allow_http", "false", "accept http:// Web Push endpoints and endpoints on private networks (tests, a UnifiedPush distributor on a private network); off, https:// to public addresses only",
		"use true or false",
		func(s *Settings, v string) (err error) { s.PushAllowHTTP, err = parseBool(v); return })),
}

// checkPush validates combinations of the push keys.
func (s *Settings) checkPush() error {
	if s.PushWebhookURL != "" && s.PushWebhookSecret == "" {
		return &Error{Key: "push_webhook_secret", Source: s.Source("push_webhook_url"),
			Reason: "push_webhook_url is set but push_webhook_secret is not: the receiver could not tell chatd's requests from anyone's",
			Fix:    "set push_webhook_secret (CHAT_PUSH_WEBHOOK_SECRET) to at least 32 bytes, e.g. `openssl rand -hex 32`, shared with the receiver"}
	}
	if s.PushWebhookURL == "" && s.PushWebhookSecret != "" {
		return &Error{Key: "push_webhook_url", Source: s.Source("push_webhook_secret"),
			Reason: "push_webhook_secret is set but push_webhook_url is not",
			Fix:    "set push_webhook_url (CHAT_PUSH_WEBHOOK_URL), or unset push_webhook_secret"}
	}
	return nil
}

// redactedPush adds the push keys to Redacted's map.
func (s Settings) redactedPush(m map[string]any) {
	m["push_delay"] = s.PushDelay.String()
	m["push_min_interval"] = s.PushMinInterval.String()
	m["push_preview"] = s.PushPreview
	m["push_timeout"] = s.PushTimeout.String()
	m["push_queue_size"] = s.PushQueueSize
	m["push_kafka_topic"] = s.PushKafkaTopic
	m["push_webhook_url"] = s.PushWebhookURL
	m["push_webhook_secret"] = redactSecret(s.PushWebhookSecret)
	m["vapid_private_key"] = redactSecret(s.VAPIDPrivateKey)
	m["vapid_subject"] = s.VAPIDSubject
	m["push_allow_http"] = s.PushAllowHTTP
}
