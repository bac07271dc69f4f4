package delivery

import (
	"container/list"
	"sync"
	"time"
	"unsafe"

	chat "github.com/chatd/chatd"
)

// recent keeps the encoded message.new payloads of the latest messages of
// recently active conversations, so a session that fell behind (queue full,
// a gap, a reconnect a moment ago) catches up from memory instead of reading
// and re-encoding the same rows from PostgreSQL once per member. Under
// saturation that catch-up path dominated the server's CPU and its pool.
//
// Only committed entries enter it (the hub's fan-out is fed after commit),
// and a recall forgets the conversation's entries (a reader that knows of
// an entry committed past what the fan-out saw gets nothing: it may be a
// recall on its way). A hit is the entry as it
// was committed, as live delivery sent it: PostgreSQL would give a message
// edited since with its new body, and either way the edit entries after it
// bring the client to the same text. Payloads are shared by all members, so an edit is served only
// to a reader who may read its body (chat.FloorHidesEdit): for anyone
// else the cache ends before it and PostgreSQL, which hides the body for
// them, answers. A miss falls through to PostgreSQL: the cache is an optimisation,
// never the source of truth. The fan-out goroutine writes; session pumps
// read; a mutex guards it.
//
// Every byte it holds counts against maxBytes: payloads, their slots and
// each conversation's bookkeeping. A conversation's ring grows with its
// messages (1, 2, 4, ... up to perConv slots), so a hundred thousand quiet
// conversations with a message each cost a few hundred bytes apiece, not a
// full ring.
type recent struct {
	mu       sync.Mutex
	perConv  int
	maxBytes int
	bytes    int
	convs    map[int64]*list.Element // of *recentRing, most recently written at the front
	lru      list.List
}

type recentRing struct {
	conv    int64
	first   int64 // seq of entries[head]
	high    int64 // highest seq ever put, even if a restart dropped it
	head, n int
	entries []recentEntry
	bytes   int
}

type recentEntry struct {
	payload []byte
	large   bool
	at      time.Time
	// editOf is, for an edit, the message it rewrites (else 0): its
	// payload carries the new body, which a reader whose history floor
	// reaches that message must not get.
	editOf int64
	// writer is the user who wrote the entry (chat.Event.Writer).
	writer int64
}

// What the cache's own structures cost, counted with the payloads:
// ringCost a conversation (its ring, list element and map entry), slotCost
// a slot of its ring whether used or not.
var (
	ringCost = int(unsafe.Sizeof(recentRing{})) + int(unsafe.Sizeof(list.Element{})) + 64
	slotCost = int(unsafe.Sizeof(recentEntry{}))
)

func newRecent(perConv, maxBytes int) *recent {
	return &recent{perConv: perConv, maxBytes: maxBytes, convs: map[int64]*list.Element{}}
}

// put records entry seq of conv. Seqs of a conversation arrive in order
// from the fan-out; anything else (a cross-node event out of order) restarts
// the conversation's ring at seq, so a ring always holds consecutive seqs.
func (r *recent) put(conv, seq int64, e recentEntry) {
	if r == nil || r.perConv <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var g *recentRing
	if el, ok := r.convs[conv]; ok {
		g = el.Value.(*recentRing)
		r.lru.MoveToFront(el)
	} else {
		g = &recentRing{conv: conv, bytes: ringCost}
		r.bytes += ringCost
		r.convs[conv] = r.lru.PushFront(g)
	}
	if seq > g.high {
		g.high = seq
	}
	if g.n > 0 && seq != g.first+int64(g.n) {
		if seq < g.first+int64(g.n) && seq >= g.first {
			return // already there
		}
		if seq < g.first && g.first+int64(g.n)-1 == g.high {
			// An old event again (a cross-node duplicate): the ring
			// already holds newer, consecutive seqs up to the highest.
			return
		}
		for i := range g.n {
			r.account(g, -cap(g.entries[(g.head+i)%len(g.entries)].payload))
		}
		clear(g.entries)
		g.head, g.n = 0, 0
	}
	if g.n == 0 {
		g.first = seq
	}
	if g.n == len(g.entries) && len(g.entries) < r.perConv {
		r.grow(g)
	}
	if g.n == len(g.entries) {
		old := &g.entries[g.head]
		r.account(g, -cap(old.payload))
		*old = recentEntry{}
		g.head = (g.head + 1) % len(g.entries)
		g.first++
		g.n--
	}
	g.entries[(g.head+g.n)%len(g.entries)] = e
	g.n++
	r.account(g, cap(e.payload))
	for r.bytes > r.maxBytes && r.lru.Len() > 1 {
		el := r.lru.Back()
		old := el.Value.(*recentRing)
		r.lru.Remove(el)
		delete(r.convs, old.conv)
		r.bytes -= old.bytes
	}
}

func (r *recent) account(g *recentRing, n int) {
	g.bytes += n
	r.bytes += n
}

// grow doubles g's ring (up to perConv slots), oldest entry first.
func (r *recent) grow(g *recentRing) {
	size := min(max(2*len(g.entries), 1), r.perConv)
	entries := make([]recentEntry, size)
	for i := range g.n {
		entries[i] = g.entries[(g.head+i)%len(g.entries)]
	}
	r.account(g, (size-len(g.entries))*slotCost)
	g.entries, g.head = entries, 0
}

// forget drops what the cache holds of conv (its high mark too): its
// entries are no longer what PostgreSQL would return.
func (r *recent) forget(conv int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.convs[conv]; ok {
		r.bytes -= el.Value.(*recentRing).bytes
		r.lru.Remove(el)
		delete(r.convs, conv)
	}
}

// get appends to dst up to max consecutive entries of conv starting at seq
// from, rendered for a session that wants large (slim) or full payloads,
// for a reader whose history floor is at most floor; it stops at the first
// seq it does not hold and at an edit that reader must not read. complete reports that dst now
// ends at the highest seq the fan-out has seen for conv: a session that was
// dropping live events while behind has then missed nothing.
//
// It serves nothing while the reader knows of a committed entry past that
// highest seq (until): the fan-out has not seen it yet (another node's,
// the relay late), and it may be the recall of a message held here, whose
// text must go to nobody any more. PostgreSQL answers then.
func (r *recent) get(dst []recentEntry, conv, from, until int64, max int, large bool, floor int64) (_ []recentEntry, complete bool) {
	if r == nil {
		return dst, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.convs[conv]
	if !ok {
		return dst, false
	}
	g := el.Value.(*recentRing)
	if from < g.first || until > g.high {
		return dst, false
	}
	next := from
	for i := from - g.first; i < int64(g.n) && max > 0; i++ {
		e := g.entries[(g.head+int(i))%len(g.entries)]
		if e.large != large || (e.editOf > 0 && chat.FloorHidesEdit(e.editOf, floor)) {
			break
		}
		dst = append(dst, e)
		next++
		max--
	}
	return dst, next > g.high
}
