package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// duplicateKeys lists the keys that appear more than once at the top of
// one JSON log line (nil when it is not a JSON object).
func duplicateKeys(line string) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return dups
		}
		key, _ := tok.(string)
		if seen[key] {
			dups = append(dups, key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return dups
		}
	}
	return dups
}

// With CHAT_LOG_FORMAT=json every line is one JSON object with each key
// once. The relay, the Kafka consumer and the outbox pruner used to be
// named twice ("component":"relay","component":"relay": the server and
// the package both added it), which log pipelines that refuse duplicate
// keys (Elasticsearch's strict JSON parser) reject or mangle.
func TestJSONLogLinesNameEachKeyOnce(t *testing.T) {
	db := pgtest.NewDB(t)
	withKafka := startChatd(t, map[string]string{
		"CHAT_DATABASE_URL": db, "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off", "CHAT_LOG_FORMAT": "json",
		"CHAT_KAFKA_BROKERS": "127.0.0.1:1", // refused at once: the consumer warns, the relay takes the lease
		"CHAT_NODE_ID":       "json-a",
	})
	waitLog(t, withKafka.logs, regexp.MustCompile(`"msg":"relay: took the lease`), "the relay's lease line")
	waitLog(t, withKafka.logs, regexp.MustCompile(`"msg":"kafka consumer: `), "a Kafka consumer line")
	// A node without Kafka beside it prunes nothing, and its pruner says so.
	without := startChatd(t, map[string]string{
		"CHAT_DATABASE_URL": db, "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off", "CHAT_LOG_FORMAT": "json",
		"CHAT_NODE_ID": "json-b",
	})
	waitLog(t, without.logs, regexp.MustCompile(`"msg":"outbox pruner: `), "an outbox pruner line")
	without.cancel()
	<-without.done
	withKafka.cancel()
	<-withKafka.done
	for _, out := range []string{withKafka.logs.String(), without.logs.String()} {
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(line, "{") {
				t.Errorf("not a JSON line: %s", line)
				continue
			}
			if d := duplicateKeys(line); d != nil {
				t.Errorf("keys %v appear twice: %s", d, line)
			}
		}
	}
}

// The OpenTelemetry SDK reports what it cannot use (an exporter variable
// it cannot parse, an export that failed before chatd's error handler
// applies) through its own global logger, which wrote bare lines to the
// process's stderr ("2026/12/06 05:46:41 internal_logging.go:50:
// "msg"="parse duration" ..."), outside chatd's log: neither JSON under
// CHAT_LOG_FORMAT=json nor at any level. They are chatd's log lines now.
func TestTheTracingSDKsOwnMessagesAreLinesOfChatdsLog(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon") // read by the exporter from the process's environment
	// The tracer provider is made, then the start fails at once on a
	// database that refuses connections, and the provider is flushed.
	code, _, errOut := chatd(t, t.Context(), map[string]string{
		"CHAT_DATABASE_URL": "postgres://chat@127.0.0.1:1/chat", "CHAT_DATA_DIR": t.TempDir(),
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off", "CHAT_LOG_FORMAT": "json",
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon",
	})
	if code != 1 {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("not a JSON line: %s", line)
			continue
		}
		found = found || strings.Contains(line, `soon`)
	}
	if !found {
		t.Errorf("no line of chatd's log tells that the exporter could not read OTEL_EXPORTER_OTLP_TIMEOUT=soon:\n%s", errOut)
	}
}
