package chat_test

import (
	"path"
	"strings"
	"testing"

	chat "github.com/chatd/chatd"
)

// cutAsBefore is how a long name was cut: a rune at a time from the end
// of what precedes its extension (an extension of more than 16 bytes
// being none), the name copied into runes and back each time.
func cutAsBefore(name string) string {
	for len(name) > chat.MaxFileNameBytes {
		ext := path.Ext(name)
		if len(ext) > 16 {
			ext = ""
		}
		base := []rune(strings.TrimSuffix(name, ext))
		name = string(base[:len(base)-1]) + ext
	}
	return name
}

// A name as long as a request may be (160 KiB) was cut to
// MaxFileNameBytes a rune at a time, the whole name copied each time:
// minutes of a core, before the upload rate was charged (a ticket asked
// with a new Idempotency-Key cleans the name first, to compare it). It is
// cut in one pass, to what it was cut to before.
func TestALongFileNameIsCutInOnePassToWhatItWasCutTo(t *testing.T) {
	r := strings.Repeat
	for _, name := range []string{
		r("a", 300) + ".jpg", r("é", 300) + ".jpeg", r("a", 300), r("日", 100) + ".tar.gz",
		r("a", 300) + "." + r("b", 40), r("é", 200) + "." + r("é", 20), "a.b" + r("c", 300),
		r("x", 250) + "." + r("🙂", 10), r("🙂", 70) + ".🙂🙂🙂🙂", r("a", 254) + ".b", r("a", 250) + "." + r("b", 17),
	} {
		got, err := chat.CleanFileName(name)
		if want := cutAsBefore(name); err != nil || got != want {
			t.Errorf("CleanFileName(%.20q… of %d bytes) = %q, %v; want %q", name, len(name), got, err, want)
		}
	}
	long := r("é", 5000) + ".jpg"
	if allocs := testing.AllocsPerRun(1, func() { _, _ = chat.CleanFileName(long) }); allocs > 10 {
		t.Errorf("cutting a name of %d bytes took %.0f allocations, want a few", len(long), allocs)
	}
}
