package testnode

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/auth"
)

// Secret is the HS256 JWT secret test nodes are started with
// (CHAT_JWT_SECRET); Token mints for it.
const Secret = "test-secret-0123456789abcdef0123456789"

// Token is a JWT for user signed with Secret, valid for an hour.
func Token(t testing.TB, user int64) string {
	t.Helper()
	tok, err := auth.Mint([]byte(Secret), user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// SendPayload is the JSON of an MQTT send: {"clientMsgId", "body"}.
func SendPayload(clientMsgID, body string) []byte {
	b, _ := json.Marshal(map[string]string{"clientMsgId": clientMsgID, "body": body})
	return b
}

// HalfPut starts an upload PUT of data to path on the HTTP listener addr as
// user, writes half the body and then nothing more: a slow or stalled
// client. The connection stays open until the end of the test.
func HalfPut(t testing.TB, addr, path string, user int64, data []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", path, Token(t, user), len(data))
	if _, err := c.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
}

// The MQTT topics tests publish and subscribe to, spelled out as a
// client would, not taken from the server's code.

// MsgTopic is the topic sends of conv are published to.
func MsgTopic(conv int64) string { return fmt.Sprintf("chat/v1/conv/%d/msg", conv) }

// ReadTopic is the topic read receipts of conv are published to.
func ReadTopic(conv int64) string { return fmt.Sprintf("chat/v1/conv/%d/read", conv) }

// EventsTopic is user u's events topic.
func EventsTopic(u int64) string { return fmt.Sprintf("chat/v1/user/%d/events", u) }
