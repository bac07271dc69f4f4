package hooks

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	chat "github.com/chatd/chatd"
)

// decodeByDecoder is decodeStrict as a json.Decoder alone decides it:
// the reference the in-place path must agree with.
func decodeByDecoder(b []byte, v any) error {
	if len(b) == 0 {
		return chat.Errorf(chat.CodeInvalid, "payload is empty; expected a JSON object")
	}
	if !utf8.Valid(b) {
		return chat.Errorf(chat.CodeInvalid, "payload is not valid UTF-8")
	}
	return decodeExplained(b, v)
}

// FuzzDecodeStrictAnswersAsTheDecoder: every payload of a send, change
// or read receipt decodes to the same value, or is refused with the same
// words, as a json.Decoder with unknown fields disallowed decides it.
func FuzzDecodeStrictAnswersAsTheDecoder(f *testing.F) {
	for _, s := range []string{
		`{"clientMsgId":"a","body":"x"}`, `{"clientMsgId":"a","body":"x"} `, `{"clientMsgId":"a","body":"x"} {}`,
		`{"clientMsgId":"a","body":"x"}x`, `{"clientMsgId":"a","body":"x","admin":true}`, `{"ClientMsgId":"a"}`,
		`{"clientMsgId":"a","clientMsgId":"b"}`, `{"body":1}`, `{"replyTo":"1"}`, `{"replyTo":1.5}`,
		`{"forward":{"conversationId":1,"seq":2}}`, `{"forward":{"conversationId":1,"seq":2,"x":3}}`, `{"forward":{"Seq":2}}`,
		`{"attachments":[{"uploadId":"u","caption":"c"}]}`, `{"attachments":[{"uploadId":"u","UploadId":"v"}]}`,
		`{"attachments":[{"uploadId":"u","x":1}]}`, `{"attachments":{}}`, `{"forward":null}`, `null`, `[]`, `"x"`, `1`,
		`{`, `{"body":"x"`, `{"body":"\u0041"}`, `{"bo\u0064y":"x"}`, `{"seq":1}`, `{"seq":1,"on":true,"emoji":"👍"}`,
		`{"on":"yes"}`, `{"on":null}`, "{\"body\":\"\xff\"}", ``, ` `, `{}`, `{} `, `{}}`, `{"x":[` + strings.Repeat("[", 100),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, newV := range []func() any{
			func() any { return new(chat.SendPayload) },
			func() any { return new(changePayload) },
			func() any { return new(readPayload) },
		} {
			got, want := newV(), newV()
			gotErr, wantErr := decodeStrict(b, got), decodeByDecoder(b, want)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("%T from %q: error %v, the Decoder's %v", got, b, gotErr, wantErr)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("%T from %q: %+v, the Decoder's %+v", got, b, got, want)
			}
		}
	})
}

// TestAPublishWithALoneSurrogateEscapeIsRefused: MQTT refuses a body
// whose \u escape is half a surrogate pair, as HTTP and RPC do, rather
// than storing U+FFFD in its place; a whole pair is the character.
func TestAPublishWithALoneSurrogateEscapeIsRefused(t *testing.T) {
	var p chat.SendPayload
	err := decodeStrict([]byte(`{"clientMsgId":"6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11","body":"a\ud800b"}`), &p)
	if chat.ErrorCode(err) != chat.CodeInvalid {
		t.Fatalf("lone surrogate: err %v, body %q; want invalid", err, p.Body)
	}
	p = chat.SendPayload{}
	if err := decodeStrict([]byte(`{"clientMsgId":"6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11","body":"\ud83d\udc4d"}`), &p); err != nil || p.Body != "\U0001F44D" {
		t.Fatalf("whole pair: err %v, body %q", err, p.Body)
	}
}

// TestARefusedPayloadsReasonQuotesALongFieldNameShort: a field name as
// long as the payload allows is quoted clipped (valid UTF-8, with "..."),
// so the PUBACK's reason string, at most 65,535 bytes with a 16-bit
// length, stays well-formed; before, a 70,000-byte name came back whole.
func TestARefusedPayloadsReasonQuotesALongFieldNameShort(t *testing.T) {
	for _, name := range []string{strings.Repeat("k", 70000), strings.Repeat("é", 35000)} {
		for _, payload := range []string{`{"` + name + `":1}`, `{"body":"x","` + name + `":1,"` + name + `":2}`} {
			var p chat.SendPayload
			err := decodeStrict([]byte(payload), &p)
			msg := chat.ErrorMessage(err)
			if chat.ErrorCode(err) != chat.CodeInvalid || len(msg) > 256 || !utf8.ValidString(msg) || !strings.Contains(msg, "...") {
				t.Errorf("a %d-byte field name: code %s, a %d-byte message %.120q", len(name), chat.ErrorCode(err), len(msg), msg)
			}
		}
	}
}
