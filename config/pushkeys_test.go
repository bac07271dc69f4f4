package config

import (
	"strings"
	"testing"
)

func TestPushSettingsNameTheKeyTheSourceAndTheFix(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
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
	}, func(t *testing.T, err error) {
		if strings.Contains(err.Error(), "ssss") {
			t.Errorf("error %q echoes the secret", err)
		}
	})
}

// TestPushRequestsAndEventsMayNotShareATopic: with push_kafka_topic set to
// kafka_topic's topic, FCM and APNs push requests (device tokens, and
// message text with push_preview) were written into the event stream:
// every node's consumer skipped each as an undecodable event, and every
// downstream consumer of chat.events read them. Load refuses it.
func TestPushRequestsAndEventsMayNotShareATopic(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
		{"the default event topic", map[string]string{"CHAT_KAFKA_BROKERS": "kafka:9092", "CHAT_PUSH_KAFKA_TOPIC": "chat.events"},
			[]string{"push_kafka_topic (from env CHAT_PUSH_KAFKA_TOPIC)", "kafka_topic", "chat.events"}},
		{"a topic of one's own", map[string]string{"CHAT_KAFKA_BROKERS": "kafka:9092", "CHAT_KAFKA_TOPIC": "chat", "CHAT_PUSH_KAFKA_TOPIC": "chat"},
			[]string{"push_kafka_topic", "kafka_topic"}},
	}, nil)
	// Without Kafka neither topic is written: nothing to refuse.
	mustLoad(t, nil, map[string]string{"CHAT_PUSH_KAFKA_TOPIC": "chat.events"})
}
