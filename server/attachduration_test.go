package server_test

import (
	"context"
	"encoding/binary"
	"net/http"
	"testing"

	chat "github.com/chatd/chatd"
)

// TestADurationOfMoreThan24DaysIsKeptAndOneBeyondWhatJSONReadersKeepIsRefused:
// the uploader's durationMs is what members see when chatd cannot read the
// file's own (an MP3). Like a duration read from a file, it is at most
// 2^53-1 ms, the largest integer a JSON reader using doubles (JavaScript,
// the web client) keeps exactly: a larger one is refused (400 invalid),
// not handed on to every member's client as a number they read wrong.
// Up to that bound a duration, declared or read, is kept: one over 2^31
// ms (24.8 days: a WAV whose header says 1 byte a second) used to fail
// the upload with 500 internal, the database taking it for a 32-bit
// integer.
func TestADurationOfMoreThan24DaysIsKeptAndOneBeyondWhatJSONReadersKeepIsRefused(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, false, nil)
	g := mustGroup(t, context.Background(), n.Server, 1, "g", []int64{2})
	mp3 := append([]byte("ID3\x03\x00\x00\x00\x00\x00\x00"), make([]byte, 100)...)
	for _, d := range []int64{1 << 53, 1 << 62, 1<<63 - 1} {
		r := n.call(t, 1, "POST", "/v1/uploads", map[string]any{"conversationId": g.ID, "name": "a.mp3",
			"contentType": "audio/mpeg", "size": len(mp3), "durationMs": d}, nil)
		if r.status != http.StatusBadRequest || errCode(r) != "invalid" {
			t.Errorf("durationMs %d: %d %s, want 400 invalid", d, r.status, r.body)
		}
	}
	r := n.call(t, 1, "POST", "/v1/uploads", map[string]any{"conversationId": g.ID, "name": "a.mp3",
		"contentType": "audio/mpeg", "size": len(mp3), "durationMs": 1<<53 - 1}, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("durationMs 2^53-1: %d %s", r.status, r.body)
	}
	if r = n.put(t, 1, decode[chat.UploadTicket](t, r), mp3); r.status != http.StatusOK {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	if a := decode[chat.Upload](t, r).Attachment; a == nil || a.DurationMs != 1<<53-1 {
		t.Errorf("attachment %+v, want durationMs 2^53-1", a)
	}
	// A WAV of 3,000,000 bytes at 1 byte a second: 3e9 ms, read.
	wav := []byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x08\x00data")
	wav = binary.LittleEndian.AppendUint32(wav, 3_000_000)
	wav = append(wav, make([]byte, 3_000_000)...)
	if a := n.upload(t, 1, g.ID, "long.wav", "audio/wav", wav).Attachment; a.DurationMs != 3_000_000_000 {
		t.Errorf("the WAV's durationMs %d, want 3000000000", a.DurationMs)
	}
}
