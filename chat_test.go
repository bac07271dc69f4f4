package chat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

func TestValidateBodyRejectsEmptyOversizeInvalidUTF8AndNUL(t *testing.T) {
	l := chat.Limits{MaxBodyBytes: 8}
	cases := map[string]chat.Code{
		"":             chat.CodeInvalid,
		"123456789":    chat.CodeTooLarge,
		"\xff":         chat.CodeInvalid,
		"a\x00b":       chat.CodeInvalid,
		"héllo":        "",
		"12345678":     "",
		"\u00e9\u00e9": "",
	}
	for body, want := range cases {
		err := l.ValidateBody(body)
		if got := codeOf(err); got != want {
			t.Errorf("ValidateBody(%q) = %v, want code %q", body, err, want)
		}
	}
	if err := (chat.Limits{}).ValidateBody(strings.Repeat("x", chat.DefaultMaxBodyBytes)); err != nil {
		t.Errorf("16 KiB default must pass: %v", err)
	}
	if err := (chat.Limits{}).ValidateBody(strings.Repeat("x", chat.DefaultMaxBodyBytes+1)); codeOf(err) != chat.CodeTooLarge {
		t.Errorf("16 KiB + 1 must be too large: %v", err)
	}
}

func codeOf(err error) chat.Code {
	if err == nil {
		return ""
	}
	return chat.ErrorCode(err)
}

func TestClientMsgIDMustBeACanonicalUUID(t *testing.T) {
	good := "6F1C1F1E-8D2A-4B8E-9A55-0F6F2F0D9B11"
	id, err := chat.ValidateClientMsgID(good)
	if err != nil || id != strings.ToLower(good) {
		t.Fatalf("upper-case UUID: %q %v", id, err)
	}
	for _, bad := range []string{"", "123", "{6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11}", "urn:uuid:6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11", "6f1c1f1e8d2a4b8e9a550f6f2f0d9b11"} {
		if _, err := chat.ValidateClientMsgID(bad); !errors.Is(err, chat.ErrInvalid) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}

func TestTypedErrorsMatchByCode(t *testing.T) {
	err := chat.Errorf(chat.CodeNotMember, "user 5 is not in 7")
	if !errors.Is(err, chat.ErrNotMember) || errors.Is(err, chat.ErrNotFound) {
		t.Fatal("errors.Is must match by code only")
	}
	wrapped := chat.Unavailable("send", errors.New("connection refused"))
	if !errors.Is(wrapped, chat.ErrUnavailable) || chat.ErrorMessage(wrapped) == "connection refused" {
		t.Fatalf("unavailable leaks its cause to clients: %q", chat.ErrorMessage(wrapped))
	}
	if chat.ErrorCode(errors.New("boom")) != chat.CodeInternal || chat.ErrorMessage(errors.New("secret")) != "internal error" {
		t.Fatal("untyped errors must be internal and opaque")
	}
}

func TestInboxCursorRoundTripsAndRejectsForgeries(t *testing.T) {
	c := chat.EncodeInboxCursor(1795993448123456, 42)
	at, id, err := chat.DecodeInboxCursor(c)
	if err != nil || at != 1795993448123456 || id != 42 {
		t.Fatalf("round trip: %d %d %v", at, id, err)
	}
	for _, bad := range []string{"x", "!!!", chat.EncodeInboxCursor(1, 0), "MTo", "MTp4"} {
		if _, _, err := chat.DecodeInboxCursor(bad); !errors.Is(err, chat.ErrInvalid) {
			t.Errorf("cursor %q accepted", bad)
		}
	}
}

func TestClampLimit(t *testing.T) {
	for _, c := range [][3]int{{0, 50, 50}, {-1, 50, 50}, {10, 50, 10}, {500, 50, 200}} {
		if got := chat.ClampLimit(c[0], c[1], 200); got != c[2] {
			t.Errorf("ClampLimit(%d) = %d, want %d", c[0], got, c[2])
		}
	}
}

func FuzzDecodeInboxCursor(f *testing.F) {
	f.Add(chat.EncodeInboxCursor(1795993448123456, 42))
	f.Add("")
	f.Add("MTo")
	f.Fuzz(func(t *testing.T, s string) {
		at, id, err := chat.DecodeInboxCursor(s)
		if err == nil {
			if id <= 0 {
				t.Fatalf("accepted id %d", id)
			}
			if _, _, err := chat.DecodeInboxCursor(chat.EncodeInboxCursor(at, id)); err != nil {
				t.Fatalf("re-encoded cursor rejected: %v", err)
			}
		}
	})
}

// TestEventJSONKeepsMarkupAsItIs: a body of code or markup travels as it
// is, not HTML-escaped (\u003c is 6 bytes for 1), so a message of the
// largest body stays within what a client with a small Maximum Packet
// Size takes, and the event still decodes to the same body.
func TestEventJSONKeepsMarkupAsItIs(t *testing.T) {
	body := "<b>fish & chips</b> -> x > y"
	b, err := chat.EncodeEvent(chat.Event{Type: chat.EventMessageNew, ConversationID: 7, Seq: 1, SenderID: 1, Body: &body})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"body":"<b>fish & chips</b> -> x > y"`)) || bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("event %s: want the body as it is and no trailing newline", b)
	}
	var back chat.Event
	if err := json.Unmarshal(b, &back); err != nil || back.Body == nil || *back.Body != body {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	big := strings.Repeat("<", 16<<10)
	b, err = chat.EncodeEvent(chat.Event{Type: chat.EventMessageNew, ConversationID: 7, Seq: 2, SenderID: 1, Body: &big})
	if err != nil || len(b) > len(big)+200 {
		t.Fatalf("a 16 KiB body of '<' is a %d-byte event (%v)", len(b), err)
	}
}

// The avatar URL limit (2,048 bytes) holds for what is stored: the URL
// percent-encoded, where a character like "ä" takes 6 bytes, not 2.
func TestAnAvatarURLIsLimitedAsItIsStored(t *testing.T) {
	long := "https://img.example/" + strings.Repeat("ä", 1000) // 2,020 bytes as given, 6,020 encoded
	if got, err := chat.ValidateAvatarURL(long); err == nil {
		t.Fatalf("accepted, stored as %d bytes; want invalid", len(got))
	}
	ok := "https://img.example/" + strings.Repeat("ä", 300) // 1,820 encoded
	if got, err := chat.ValidateAvatarURL(ok); err != nil || len(got) > chat.MaxAvatarURLBytes {
		t.Fatalf("%d bytes encoded: %v", len(got), err)
	}
}

// The writer of an entry is the same whether a session gets it live (its
// event) or catches up on it (the stored entry); a system entry has none.
func TestAnEntrysWriterIsTheSameLiveAndCaughtUp(t *testing.T) {
	for _, kind := range []chat.EntryKind{chat.KindMessage, "", chat.KindEdit, chat.KindRecall, chat.KindReaction, chat.KindSystem} {
		m := chat.Message{ConversationID: 7, Seq: 3, Kind: kind, SenderID: 5, TargetSeq: 2}
		want := int64(5)
		if kind == chat.KindSystem {
			want = 0
		}
		if got := m.Writer(); got != want {
			t.Errorf("%q entry's writer %d, want %d", kind, got, want)
		}
		if got := chat.EntryEvent(m).Writer(); got != want {
			t.Errorf("%q event's writer %d, want %d", kind, got, want)
		}
	}
	if w := (chat.Event{Type: chat.EventReadUpdated, UserID: 5}).Writer(); w != 0 {
		t.Errorf("read.updated has writer %d, want none", w)
	}
}

// Every bidirectional formatting character is refused in a display name
// and a group title, the implicit marks (U+200E, U+200F, U+061C) as well
// as the embeddings, overrides and isolates: each reorders or re-anchors
// the text drawn around it, so "Ann\u200f" beside a right-to-left name
// could pass for someone else.
func TestANameOrTitleWithAnyBidiControlIsRefused(t *testing.T) {
	for _, r := range []rune{'\u061c', '\u200e', '\u200f', '\u202a', '\u202e', '\u2066', '\u2069'} {
		s := "Ann" + string(r) + "Lee"
		if got, err := chat.ValidateDisplayName(s); chat.ErrorCode(err) != chat.CodeInvalid {
			t.Errorf("display name with U+%04X: %q, %v; want invalid", r, got, err)
		}
		if got, err := chat.ValidateGroupTitle(s); chat.ErrorCode(err) != chat.CodeInvalid {
			t.Errorf("title with U+%04X: %q, %v; want invalid", r, got, err)
		}
		implicit := r == '\u061c' || r == '\u200e' || r == '\u200f'
		if got, err := chat.ValidateAbout("about", s); (chat.ErrorCode(err) == chat.CodeInvalid) == implicit {
			t.Errorf("about with U+%04X: %q, %v; want invalid %v", r, got, err, !implicit)
		}
	}
}

// An about text is prose: right-to-left writing mixed with numbers or
// Latin words needs the implicit marks, which open no embedding.
func TestAnAboutTextKeepsTheImplicitBidiMarks(t *testing.T) {
	in := "\u05e9\u05dc\u05d5\u05dd 2024\u200f \u0645\u0631\u062d\u0628\u0627\u061c 5"
	if got, err := chat.ValidateAbout("about", in); err != nil || got != in {
		t.Fatalf("about %q: %q, %v; want it kept", in, got, err)
	}
}

// What is stored of an avatar URL is percent-encoded as a whole, its
// query too (the path and fragment always were): no space, quote, angle
// bracket or non-ASCII byte reaches a client as given, and a '%' that
// starts no escape is encoded itself. Escapes and the query's separators
// are kept as they are.
func TestAnAvatarURLsQueryIsStoredPercentEncoded(t *testing.T) {
	for in, want := range map[string]string{
		"https://img.example/a.png?v=ä b":          "https://img.example/a.png?v=%C3%A4%20b",
		`https://img.example/a.png?q="<x>"`:        "https://img.example/a.png?q=%22%3Cx%3E%22",
		"https://img.example/a.png?s=%zz&t=%2F":    "https://img.example/a.png?s=%25zz&t=%2F",
		"https://img.example/a.png?a=1&b=2;c=:@/?": "https://img.example/a.png?a=1&b=2;c=:@/?",
		"https://img.example/ä.png?x#ä":            "https://img.example/%C3%A4.png?x#%C3%A4",
	} {
		got, err := chat.ValidateAvatarURL(in)
		if err != nil || got != want {
			t.Errorf("%q stored as %q (%v), want %q", in, got, err, want)
		}
	}
	// The limit holds for the encoded query as for the encoded path.
	long := "https://img.example/a.png?n=" + strings.Repeat("ä", 1000)
	if got, err := chat.ValidateAvatarURL(long); err == nil {
		t.Fatalf("accepted, stored as %d bytes; want invalid", len(got))
	}
}
