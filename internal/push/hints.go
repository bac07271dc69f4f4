package push

import (
	"container/heap"
	"time"
)

// hintQueue is the decider's set of conversations waiting for a decision,
// each with the time it is due: a map for the earliest due time per
// conversation, and a min-heap by due time to take the due ones without
// looking at the rest (Publish runs on the commit path and must not wait
// behind a scan). Heap entries whose time no longer matches the map are
// stale and skipped. Not safe for concurrent use: the Pusher's mutex
// guards it.
type hintQueue struct {
	due  map[int64]time.Time
	heap hintHeap
}

type hintEntry struct {
	id  int64
	due time.Time
}

type hintHeap []hintEntry

func (h hintHeap) Len() int           { return len(h) }
func (h hintHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h hintHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hintHeap) Push(x any)        { *h = append(*h, x.(hintEntry)) }
func (h *hintHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newHintQueue() *hintQueue { return &hintQueue{due: map[int64]time.Time{}} }

func (q *hintQueue) len() int { return len(q.due) }

// add asks for a decision of id at t; an earlier request wins.
func (q *hintQueue) add(id int64, t time.Time) {
	if old, ok := q.due[id]; ok && !t.Before(old) {
		return
	}
	q.due[id] = t
	heap.Push(&q.heap, hintEntry{id, t})
	// Stale entries pile up only when hints are moved earlier; compact
	// when they outnumber the live ones.
	if len(q.heap) > 2*len(q.due)+1024 {
		q.compact()
	}
}

func (q *hintQueue) has(id int64) bool {
	_, ok := q.due[id]
	return ok
}

// take removes and returns up to n conversations due at now.
func (q *hintQueue) take(now time.Time, n int) []int64 {
	var ids []int64
	for len(q.heap) > 0 && len(ids) < n {
		e := q.heap[0]
		if e.due.After(now) {
			break
		}
		heap.Pop(&q.heap)
		if t, ok := q.due[e.id]; ok && t.Equal(e.due) {
			delete(q.due, e.id)
			ids = append(ids, e.id)
		}
	}
	return ids
}

// anyDue reports whether the earliest heap entry is due at now; it may be
// a stale one.
func (q *hintQueue) anyDue(now time.Time) bool {
	return len(q.heap) > 0 && !q.heap[0].due.After(now)
}

func (q *hintQueue) clear() {
	clear(q.due)
	q.heap = q.heap[:0]
}

func (q *hintQueue) compact() {
	h := make(hintHeap, 0, len(q.due))
	for id, t := range q.due {
		h = append(h, hintEntry{id, t})
	}
	heap.Init(&h)
	q.heap = h
}
