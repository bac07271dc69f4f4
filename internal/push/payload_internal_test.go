package push

import (
	"encoding/json"
	"strings"
	"testing"
)

// A preview cut to fit ends on a whole character as the phone draws it:
// not inside an emoji joined with ZWJ (a dangling joiner glues the
// ellipsis on, or a family shows as one person), nor between a letter and
// its combining mark, a skin tone or a flag's second half.
func TestATruncatedPreviewKeepsWholeGraphemes(t *testing.T) {
	family := "👨\u200d👩\u200d👧" // man ZWJ woman ZWJ girl
	cases := []struct{ name, unit string }{
		{"zwj emoji", family},
		{"combining mark", "e\u0301"},       // é as e + acute
		{"devanagari", "क\u094d\u0937"},     // क्ष: virama joins the consonants
		{"skin tone", "👍\U0001F3FD"},        // thumbs up, medium skin
		{"flag", "\U0001F1FA\U0001F1F8"},    // 🇺🇸
		{"keycap", "1\ufe0f\u20e3"},         // 1️⃣
		{"rtl with a mark", "\u0628\u0650"}, // بِ
	}
	for _, c := range cases {
		s := strings.Repeat(c.unit, 200)
		for n := 1; n < 40; n++ {
			got := truncate(s, n)
			if len(got) > n && n >= len("…") {
				t.Fatalf("%s: truncate(_, %d) is %d bytes", c.name, n, len(got))
			}
			kept := strings.TrimSuffix(got, "…")
			if len(kept)%len(c.unit) != 0 {
				t.Fatalf("%s: truncate(_, %d) = %+q: a character was cut apart", c.name, n, got)
			}
		}
	}
}

// A remove of more recalled messages than a payload holds names the
// newest of them, within MaxPayloadBytes, the newest recalled (seq) last.
func TestARemoveOfManyRecallsFitsKeepingTheNewest(t *testing.T) {
	seqs := make([]int64, 2000)
	for i := range seqs {
		seqs[i] = 1_000_000_000 + int64(i)
	}
	b := Notification{Type: TypeRemove, UserID: 9, ConversationID: 42, Seq: seqs[len(seqs)-1], Seqs: seqs, Badge: 4}.encode()
	if len(b) > MaxPayloadBytes {
		t.Fatalf("remove of %d seqs: %d bytes, want at most %d", len(seqs), len(b), MaxPayloadBytes)
	}
	var n Notification
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	if len(n.Seqs) < 100 || n.Seqs[len(n.Seqs)-1] != n.Seq || n.Seqs[0] != seqs[len(seqs)-len(n.Seqs)] {
		t.Errorf("remove kept seqs %d..%d (%d), want the newest, up to %d", n.Seqs[0], n.Seqs[len(n.Seqs)-1], len(n.Seqs), n.Seq)
	}
}
