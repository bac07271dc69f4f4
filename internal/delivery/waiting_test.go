package delivery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAWaitListPastItsBoundKeepsEveryConversationsRoom: at most limit
// events wait; past it, an event of the conversation with the most
// waiting (or as many as any) is dropped, and any other takes the place
// of the event that has waited longest of the conversations with the
// most.
func TestAWaitListPastItsBoundKeepsEveryConversationsRoom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		adds  []int64 // the conversations of the events added, one each, seq = their place
		want  []string
		limit int
	}{
		{"under the bound every event waits", []int64{1, 2, 1},
			[]string{"1/1", "2/2", "1/3"}, 4},
		{"one conversation alone fills it, and its next is dropped", []int64{1, 1, 1, 1, 1},
			[]string{"1/1", "1/2", "1/3", "1/4"}, 4},
		{"another conversation's event takes the oldest of the one that fills it", []int64{1, 1, 1, 1, 2, 3},
			[]string{"1/3", "1/4", "2/5", "3/6"}, 4},
		{"an event of a conversation with as many as the most is dropped", []int64{1, 1, 2, 2, 2, 1},
			[]string{"1/1", "1/2", "2/3", "2/4"}, 4},
		{"a newcomer takes room until it has as many as the one that filled it", []int64{1, 1, 1, 1, 2, 2, 2},
			[]string{"1/3", "1/4", "2/5", "2/6"}, 4},
		{"of conversations with as many as the most, the one waiting longest gives its oldest", []int64{1, 2, 1, 2, 3},
			[]string{"2/2", "1/3", "2/4", "3/5"}, 4},
		{"the one waiting longest, whichever its id", []int64{2, 1, 2, 1, 3},
			[]string{"1/2", "2/3", "1/4", "3/5"}, 4},
		{"the event that gives way leaves the others in their order", []int64{2, 1, 3, 1, 4},
			[]string{"2/1", "3/3", "1/4", "4/5"}, 4},
		{"with room for one, each other conversation's event takes it", []int64{1, 2, 2, 1},
			[]string{"1/4"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l waitList
			for i, c := range tc.adds {
				w := laterEvent{it: item{kind: kEvent, conv: c, seq: int64(i + 1)}}
				if l.room(c, tc.limit) {
					l.add(w, tc.limit)
				}
			}
			var got []string
			for _, w := range l.evs {
				got = append(got, fmt.Sprintf("%d/%d", w.it.conv, w.it.seq))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("waiting %v, want %v", got, tc.want)
			}
			checkCounts(t, &l)
		})
	}
}

// checkCounts fails t unless l counts, for each conversation, the events
// of it l holds, and no conversation of which it holds none.
func checkCounts(t *testing.T, l *waitList) {
	t.Helper()
	per := map[int64]int{}
	for _, w := range l.evs {
		per[w.it.conv]++
	}
	for c, n := range l.per {
		if per[c] != n {
			t.Errorf("conversation %d counted %d waiting, holds %d", c, n, per[c])
		}
	}
	if len(l.per) != len(per) {
		t.Errorf("counts of %d conversations, %d have events waiting", len(l.per), len(per))
	}
}

// Filtering drops what it is told to, keeps the rest in order, and the
// counts with them.
func TestAWaitListFilteredKeepsItsCounts(t *testing.T) {
	var l waitList
	for i, c := range []int64{1, 2, 1, 3} {
		l.add(laterEvent{it: item{kind: kEvent, conv: c, seq: int64(i + 1)}}, 8)
	}
	l.filter(func(w *laterEvent) bool { return w.it.conv != 1 })
	if l.has(1) || !l.has(2) || !l.has(3) || l.len() != 2 || l.evs[0].it.seq != 2 || l.evs[1].it.seq != 4 {
		t.Fatalf("after dropping conversation 1: %+v, counts %v", l.evs, l.per)
	}
}

// A filter that changes the events it keeps (a resync clears blind)
// keeps the changes and the counts; one that keeps none leaves nothing
// counted, and room for a full list again.
func TestAWaitListFilteredToNothingCountsNothingAndFillsAgain(t *testing.T) {
	var l waitList
	for i, c := range []int64{1, 2, 1} {
		l.add(laterEvent{it: item{kind: kEvent, conv: c, seq: int64(i + 1)}, blind: true}, 3)
	}
	l.filter(func(w *laterEvent) bool { w.blind = false; return w.it.conv == 1 })
	if l.len() != 2 || l.evs[0].blind || l.evs[1].blind || l.has(2) {
		t.Fatalf("after a resync's filter kept conversation 1: %+v, counts %v", l.evs, l.per)
	}
	checkCounts(t, &l)
	l.filter(func(*laterEvent) bool { return false })
	if l.len() != 0 || l.has(1) || len(l.per) != 0 {
		t.Fatalf("after a filter that keeps nothing: %+v, counts %v", l.evs, l.per)
	}
	for i := range 3 {
		if !l.room(1, 3) {
			t.Fatalf("no room for event %d of 3 in an emptied list", i+1)
		}
		l.add(laterEvent{it: item{kind: kEvent, conv: 1, seq: int64(10 + i)}}, 3)
	}
	checkCounts(t, &l)
}

// However adds and filters interleave, a wait list holds at most its
// bound, in the order the events came, counted as it holds them, and
// refuses an event only at its bound and when the event's conversation
// has as many waiting as any.
func TestAWaitListKeepsItsBoundOrderAndCountsThroughAnyMix(t *testing.T) {
	const limit = 8
	r := rand.New(rand.NewPCG(1, 2))
	var l waitList
	for step := range 5000 {
		switch c := int64(r.IntN(5) + 1); r.IntN(10) {
		case 0: // a stream ended: its conversation's events go
			l.filter(func(w *laterEvent) bool { return w.it.conv != c })
		case 1: // a release: some go, the rest are no longer blind
			l.filter(func(w *laterEvent) bool { w.blind = false; return r.IntN(3) > 0 })
		default:
			w := laterEvent{it: item{kind: kEvent, conv: c, seq: int64(step)}, blind: r.IntN(2) == 0}
			if l.room(c, limit) {
				l.add(w, limit)
			} else if most := l.most(); l.len() < limit || l.per[c] != most {
				t.Fatalf("step %d: conversation %d with %d of %d waiting refused (the most: %d)", step, c, l.per[c], l.len(), most)
			}
		}
		if l.len() > limit {
			t.Fatalf("step %d: %d waiting, bound %d", step, l.len(), limit)
		}
		for i := 1; i < l.len(); i++ {
			if l.evs[i-1].it.seq >= l.evs[i].it.seq {
				t.Fatalf("step %d: out of the order they came: %+v", step, l.evs)
			}
		}
		checkCounts(t, &l)
		if t.Failed() {
			t.Fatalf("step %d: %+v, counts %v", step, l.evs, l.per)
		}
	}
}
