package shrink

import (
	"testing"

	"github.com/chatd/chatd/internal/testkit"
)

func TestAMapEmptiedAfterAPeakGivesItsTableBack(t *testing.T) {
	m := map[int64]int{}
	peak := 0
	testkit.GivesBack(t, "a map of 100,000 entries", 20, func() {
		for i := range int64(100000) {
			m[i] = 1
			m = Map(m, &peak)
		}
	}, func() {
		for i := range int64(99990) {
			delete(m, i)
			m = Map(m, &peak)
		}
	})
	if len(m) != 10 {
		t.Fatalf("%d entries left, want 10", len(m))
	}
	for i := int64(99990); i < 100000; i++ {
		if m[i] != 1 {
			t.Fatalf("entry %d lost by a copy", i)
		}
	}
}

func TestOnlyALargeMapBelowAQuarterOfItsPeakIsCopied(t *testing.T) {
	small, peak := map[int]int{}, 0
	for i := range 200 {
		small[i] = i
		small = Map(small, &peak)
	}
	clear(small)
	if Map(small, &peak); peak != 200 {
		t.Fatalf("a map of 200 at most was copied (peak %d)", peak)
	}
	big := map[int]int{}
	peak = 0
	for i := range 1000 {
		big[i] = i
		big = Map(big, &peak)
	}
	for i := range 750 {
		delete(big, i)
		big = Map(big, &peak)
	}
	if peak != 1000 {
		t.Fatalf("peak %d with a quarter of the entries left, want 1000 (no copy yet)", peak)
	}
	delete(big, 750)
	if big = Map(big, &peak); peak != 249 || len(big) != 249 || big[999] != 999 {
		t.Fatalf("below a quarter: peak %d, %d entries, want a copy of the 249 left", peak, len(big))
	}
}
