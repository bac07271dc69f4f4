package delivery

import (
	"fmt"
	"slices"
	"testing"
)

// TestAWaitListPastItsBoundKeepsEveryConversationsRoom: at most limit
// events wait; past it, an event of the conversation with the most
// waiting (or as many as any) is dropped, and any other takes the place
// of the oldest of the conversation with the most.
func TestAWaitListPastItsBoundKeepsEveryConversationsRoom(t *testing.T) {
	const limit = 4
	for _, tc := range []struct {
		name string
		adds []int64 // the conversations of the events added, one each, seq = their place
		want []string
	}{
		{"under the bound every event waits", []int64{1, 2, 1},
			[]string{"1/1", "2/2", "1/3"}},
		{"one conversation alone fills it, and its next is dropped", []int64{1, 1, 1, 1, 1},
			[]string{"1/1", "1/2", "1/3", "1/4"}},
		{"another conversation's event takes the oldest of the one that fills it", []int64{1, 1, 1, 1, 2, 3},
			[]string{"1/3", "1/4", "2/5", "3/6"}},
		{"an event of a conversation with as many as the most is dropped", []int64{1, 1, 2, 2, 2, 1},
			[]string{"1/1", "1/2", "2/3", "2/4"}},
		{"a newcomer takes room until it has as many as the one that filled it", []int64{1, 1, 1, 1, 2, 2, 2},
			[]string{"1/3", "1/4", "2/5", "2/6"}},
		{"of conversations with as many as the most, the one waiting longest gives its oldest", []int64{1, 2, 1, 2, 3},
			[]string{"2/2", "1/3", "2/4", "3/5"}},
		{"the one waiting longest, whichever its id", []int64{2, 1, 2, 1, 3},
			[]string{"1/2", "2/3", "1/4", "3/5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l waitList
			for i, c := range tc.adds {
				w := laterEvent{it: item{kind: kEvent, conv: c, seq: int64(i + 1)}}
				if l.room(c, limit) {
					l.add(w, limit)
				}
			}
			var got []string
			per := map[int64]int{}
			for _, w := range l.evs {
				got = append(got, fmt.Sprintf("%d/%d", w.it.conv, w.it.seq))
				per[w.it.conv]++
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("waiting %v, want %v", got, tc.want)
			}
			for c, n := range l.per {
				if per[c] != n {
					t.Errorf("conversation %d counted %d waiting, holds %d", c, n, per[c])
				}
			}
			if len(l.per) != len(per) {
				t.Errorf("counts of %d conversations, %d have events waiting", len(l.per), len(per))
			}
		})
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
