package config

import (
	"errors"
	"strings"
	"testing"
)

func TestPushSettingsNameTheKeyTheSourceAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"webhook without a secret", map[string]string{"CHAT_PUSH_WEBHOOK_URL": "https://pusher.internal/push"},
			[]string{"push_webhook_secret (from env CHAT_PUSH_WEBHOOK_URL)", "openssl rand -hex 32"}},
		{"secret without a webhook", map[string]string{"CHAT_PUSH_WEBHOOK_SECRET": strings.Repeat("s", 32)},
			[]string{"push_webhook_url (from env CHAT_PUSH_WEBHOOK_SECRET)", "set push_webhook_url"}},
		{"short webhook secret", map[string]string{"CHAT_PUSH_WEBHOOK_URL": "https://p/x", "CHAT_PUSH_WEBHOOK_SECRET": "short"},
			[]string{"push_webhook_secret", "shorter than 32 bytes"}},
		{"webhook not a URL", map[string]string{"CHAT_PUSH_WEBHOOK_URL": "pusher:8080"}, []string{"push_webhook_url", "https://"}},
		{"VAPID key not base64url", map[string]string{"CHAT_VAPID_PRIVATE_KEY": "not a key!"},
			[]string{"vapid_private_key", "web-push generate-vapid-keys"}},
		{"VAPID key of the wrong size", map[string]string{"CHAT_VAPID_PRIVATE_KEY": "AQID"}, []string{"vapid_private_key", "32 bytes"}},
		{"VAPID subject not a contact", map[string]string{"CHAT_VAPID_SUBJECT": "ops@example.com"}, []string{"vapid_subject", "mailto:"}},
		{"push delay zero", map[string]string{"CHAT_PUSH_DELAY": "0s"}, []string{"push_delay", "must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(nil, env(tc.env))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load: %v, want a *config.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "ssss") {
				t.Errorf("error %q echoes the secret", err)
			}
		})
	}
}
