package chat_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
)

// FuzzValidateSend: what the domain accepts as a message is what
// docs/protocol.md promises (non-empty UTF-8 without NUL within the limit,
// a canonical UUID clientMsgId, positive ids), whatever the transport.
// Seeds are in testdata/fuzz; .ci/fuzz.sh runs it for a bounded time.
func FuzzValidateSend(f *testing.F) {
	f.Add(int64(1), int64(2), "6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11", "hello")
	f.Add(int64(0), int64(-1), "6F1C1F1E-8D2A-4B8E-9A55-0F6F2F0D9B11", "")
	f.Add(int64(1), int64(1), "{6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11}", "a\x00b")
	f.Add(int64(1), int64(1), "urn:uuid:6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11", "\xff")
	f.Add(int64(9223372036854775807), int64(1), "6f1c1f1e8d2a4b8e9a550f6f2f0d9b11", strings.Repeat("é", 9000))
	limits := chat.DefaultLimits()
	f.Fuzz(func(t *testing.T, conv, sender int64, id, body string) {
		r := chat.SendRequest{ConversationID: conv, SenderID: sender, ClientMsgID: id, Body: body}
		if err := limits.ValidateSend(&r); err != nil {
			return
		}
		if conv <= 0 || sender <= 0 {
			t.Fatalf("accepted ids %d, %d", conv, sender)
		}
		if body == "" || len(body) > limits.MaxBodyBytes || !utf8.ValidString(body) || strings.ContainsRune(body, 0) {
			t.Fatalf("accepted body %q", body)
		}
		u, err := uuid.Parse(r.ClientMsgID)
		if err != nil || u.String() != r.ClientMsgID {
			t.Fatalf("clientMsgId %q canonicalised to %q", id, r.ClientMsgID)
		}
		again := r
		if err := limits.ValidateSend(&again); err != nil || again.ClientMsgID != r.ClientMsgID {
			t.Fatalf("canonical form rejected or changed: %v", err)
		}
	})
}
