package delivery

import (
	"fmt"
	"runtime"
	"testing"
)

func seqsOf(t *testing.T, es []recentEntry) []string {
	t.Helper()
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.payload)
	}
	return out
}

// An edit of message 2 (seq 5) is not for a reader whose history floor
// reaches message 2: the cache serves them up to it, then PostgreSQL
// (which hides its body for them) must answer; anyone else gets it all.
func TestRecentServesAnEditOnlyToReadersWhoseHistoryFloorIsBelowItsMessage(t *testing.T) {
	r := newRecent(8, 1<<20)
	for seq := int64(1); seq <= 6; seq++ {
		var editOf int64
		if seq == 5 {
			editOf = 2
		}
		r.put(7, seq, recentEntry{payload: []byte(fmt.Sprint(seq)), editOf: editOf})
	}
	if got, complete := r.get(nil, 7, 3, 0, 10, false, 2); fmt.Sprint(seqsOf(t, got)) != "[3 4]" || complete {
		t.Fatalf("floor 2: %v complete=%v, want [3 4] incomplete", seqsOf(t, got), complete)
	}
	if got, complete := r.get(nil, 7, 5, 0, 10, false, 3); len(got) != 0 || complete {
		t.Fatalf("floor 3 from the edit: %v complete=%v, want a miss", seqsOf(t, got), complete)
	}
	if got, complete := r.get(nil, 7, 3, 0, 10, false, 1); fmt.Sprint(seqsOf(t, got)) != "[3 4 5 6]" || !complete {
		t.Fatalf("floor 1: %v complete=%v, want [3 4 5 6] complete", seqsOf(t, got), complete)
	}
}

func TestRecentReturnsConsecutiveSeqsAndKeepsOnlyTheNewest(t *testing.T) {
	r := newRecent(4, 1<<20)
	for seq := int64(1); seq <= 6; seq++ {
		r.put(7, seq, recentEntry{payload: []byte(fmt.Sprint(seq))})
	}
	got, complete := r.get(nil, 7, 3, 0, 10, false, 0)
	if fmt.Sprint(seqsOf(t, got)) != "[3 4 5 6]" || !complete {
		t.Fatalf("get from 3: %v complete=%v, want [3 4 5 6] complete", seqsOf(t, got), complete)
	}
	if got, complete = r.get(nil, 7, 2, 0, 10, false, 0); len(got) != 0 || complete {
		t.Fatalf("get from an evicted seq: %v complete=%v, want a miss", seqsOf(t, got), complete)
	}
	if got, complete = r.get(nil, 7, 4, 0, 2, false, 0); fmt.Sprint(seqsOf(t, got)) != "[4 5]" || complete {
		t.Fatalf("get with max 2: %v complete=%v, want [4 5] incomplete", seqsOf(t, got), complete)
	}
	if got, _ = r.get(nil, 7, 4, 0, 10, true, 0); len(got) != 0 {
		t.Fatalf("a slim reader got full payloads: %v", seqsOf(t, got))
	}
	if got, complete = r.get(nil, 8, 1, 0, 10, false, 0); len(got) != 0 || complete {
		t.Fatal("an unknown conversation answered")
	}
}

func TestRecentNeverClaimsCompletenessPastAnOutOfOrderSeq(t *testing.T) {
	r := newRecent(8, 1<<20)
	r.put(1, 5, recentEntry{payload: []byte("5")})
	r.put(1, 7, recentEntry{payload: []byte("7")}) // 6 not seen (yet): the ring restarts at 7
	r.put(1, 6, recentEntry{payload: []byte("6")}) // 6 arrives late, behind what the ring holds
	if got, complete := r.get(nil, 1, 6, 0, 10, false, 0); len(got) != 0 || complete {
		t.Fatalf("got %v complete=%v for a seq the ring does not hold consecutively", seqsOf(t, got), complete)
	}
	if got, complete := r.get(nil, 1, 7, 0, 10, false, 0); fmt.Sprint(seqsOf(t, got)) != "[7]" || !complete {
		t.Fatalf("got %v complete=%v from 7, want [7] complete", seqsOf(t, got), complete)
	}
	if got, complete := r.get(nil, 1, 5, 0, 10, false, 0); len(got) != 0 || complete {
		t.Fatalf("got %v complete=%v for a seq dropped by the restart", seqsOf(t, got), complete)
	}
	// A gap that is never filled: the ring restarts at the newest seq, and
	// a reader still waiting for the seq before it is told nothing.
	r.put(1, 9, recentEntry{payload: []byte("9")})
	if got, complete := r.get(nil, 1, 8, 0, 10, false, 0); len(got) != 0 || complete {
		t.Fatalf("got %v complete=%v from 8 after 9 restarted the ring", seqsOf(t, got), complete)
	}
	r.put(1, 9, recentEntry{payload: []byte("9 again")})
	if got, _ := r.get(nil, 1, 9, 0, 10, false, 0); fmt.Sprint(seqsOf(t, got)) != "[9]" {
		t.Fatalf("a repeated put changed the ring: %v", seqsOf(t, got))
	}
}

func TestRecentStaysWithinItsMemoryBound(t *testing.T) {
	payload := make([]byte, 1000)
	r := newRecent(100, 50*1000+20*(ringCost+16*slotCost))
	for conv := int64(1); conv <= 20; conv++ {
		for seq := int64(1); seq <= 10; seq++ {
			r.put(conv, seq, recentEntry{payload: payload})
		}
	}
	if r.bytes > r.maxBytes {
		t.Fatalf("%d bytes held, bound %d", r.bytes, r.maxBytes)
	}
	if got, _ := r.get(nil, 20, 1, 0, 100, false, 0); len(got) != 10 {
		t.Fatalf("the most recently written conversation holds %d of 10", len(got))
	}
	if got, _ := r.get(nil, 1, 1, 0, 100, false, 0); len(got) != 0 {
		t.Fatal("the least recently written conversation was not evicted")
	}
	sum := 0
	for _, el := range r.convs {
		sum += el.Value.(*recentRing).bytes
	}
	if sum != r.bytes {
		t.Fatalf("accounting drifted: rings hold %d, total says %d", sum, r.bytes)
	}
}

// A hundred thousand quiet conversations with one message each must not
// hold a full ring apiece: the cache counts its slots and bookkeeping, not
// only the payloads, and stays within its budget in the process's memory
// too.
func TestRecentCountsEveryByteUnderManyQuietConversations(t *testing.T) {
	const budget = 8 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newRecent(256, budget)
	for conv := int64(1); conv <= 100_000; conv++ {
		r.put(conv, 1, recentEntry{payload: make([]byte, 100)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if r.bytes > budget {
		t.Fatalf("the cache counts %d bytes, budget %d", r.bytes, budget)
	}
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if held > budget*5/4 {
		t.Fatalf("the cache holds %d MiB of heap for a budget of %d MiB (%d conversations kept)", held>>20, budget>>20, len(r.convs))
	}
	if len(r.convs) < 10_000 {
		t.Fatalf("only %d conversations kept in %d MiB: the bookkeeping is too dear", len(r.convs), budget>>20)
	}
	runtime.KeepAlive(r)
	if got, _ := r.get(nil, 100_000, 1, 0, 10, false, 0); len(got) != 1 {
		t.Fatal("the newest conversation is not cached")
	}
}

// A reader that knows of an entry committed past the newest the fan-out
// saw (another node's, the relay late) is served nothing: that entry may
// recall a message the cache holds.
func TestRecentServesNothingToAReaderThatKnowsOfAnEntryItHasNotSeen(t *testing.T) {
	r := newRecent(8, 1<<20)
	for seq := int64(1); seq <= 3; seq++ {
		r.put(7, seq, recentEntry{payload: []byte(fmt.Sprint(seq))})
	}
	if got, complete := r.get(nil, 7, 2, 4, 10, false, 0); len(got) != 0 || complete {
		t.Fatalf("seq 4 committed and not seen: %v complete=%v, want a miss", seqsOf(t, got), complete)
	}
	if got, complete := r.get(nil, 7, 2, 3, 10, false, 0); fmt.Sprint(seqsOf(t, got)) != "[2 3]" || !complete {
		t.Fatalf("everything committed seen: %v complete=%v, want [2 3] complete", seqsOf(t, got), complete)
	}
}
