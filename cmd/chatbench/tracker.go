package main

import (
	"bufio"
	"fmt"
	"hash/maphash"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// msgRec is one message the bench published.
type msgRec struct {
	conv     int64
	sender   int32 // client index
	phase    int32 // ramp step (0 otherwise)
	sentAt   time.Duration
	expected int32 // members who must receive it
	kind     int8  // kindMessage, kindEdit, kindReaction

	mu        sync.Mutex
	seq       int64
	ackedAt   time.Duration
	acked     bool
	refused   bool
	receivers []int32 // client indices that received it (duplicates excluded)
}

// tracker keeps the books: every publish, PUBACK and delivery, so the
// report can prove that every acknowledged message reached every member.
type tracker struct {
	start time.Time

	byID  recIndex // clientMsgId -> *msgRec
	bySeq sync.Map // convSeq -> *msgRec (chat mode, once the seq is known)

	// Deliveries of entries that name no clientMsgId (reaction.updated,
	// large groups' slim message.new) that arrived before their PUBACK
	// told the seq: credited when it does. seqMu orders bySeq's stores
	// against early, so none is missed.
	seqMu sync.Mutex
	early map[convSeq][]earlyDelivery

	// Acknowledged publishes by kind (message, edit, reaction).
	kinds [3]atomic.Int64

	sent, acked, refused, unacked atomic.Int64
	delivered, duplicates         atomic.Int64
	deliveredUnacked, unknown     atomic.Int64
	gaps, gapMessages             atomic.Int64
	errorEvents, retried          atomic.Int64
	readsSent, readsAcked         atomic.Int64
	readsFailed, readUpdated      atomic.Int64

	// Deliveries owed for acknowledged messages, and how many of them
	// arrived: their difference is what is still in flight (storm catch-up).
	owed, paid atomic.Int64

	lastAck, lastDelivery atomic.Int64 // nanoseconds since start

	errMu    sync.Mutex
	errCodes map[string]int64 // failures by reason
	retries  map[string]int64 // resent after "unavailable", by reason
	firstErr string

	samplesMu sync.Mutex
	ackLat    map[int32][]int64 // by phase, microseconds
	delivLat  []int64
	readLat   []int64
}

type convSeq struct{ conv, seq int64 }

type earlyDelivery struct {
	idx int32
	s   *samples
	at  time.Duration
}

// Kinds of publishes.
const (
	kindMessage = iota
	kindEdit
	kindReaction
)

func newTracker() *tracker {
	return &tracker{start: time.Now(), early: map[convSeq][]earlyDelivery{}, errCodes: map[string]int64{}, retries: map[string]int64{}, ackLat: map[int32][]int64{}}
}

func (t *tracker) now() time.Duration { return time.Since(t.start) }

// published registers a message just before it goes out.
func (t *tracker) published(id string, r *msgRec) {
	r.sentAt = t.now()
	t.byID.Store(id, r)
	t.sent.Add(1)
}

// ackedMsg records a successful PUBACK (seq 0 when the protocol gives none).
func (t *tracker) ackedMsg(r *msgRec, seq int64, s *samples) {
	now := t.now()
	r.mu.Lock()
	if r.acked {
		r.mu.Unlock()
		return
	}
	r.acked = true
	r.ackedAt = now
	if seq > 0 {
		r.seq = seq
	}
	got := int64(len(r.receivers))
	r.mu.Unlock()
	var early []earlyDelivery
	if seq > 0 {
		k := convSeq{r.conv, seq}
		t.seqMu.Lock()
		t.bySeq.Store(k, r)
		early = t.early[k]
		delete(t.early, k)
		t.seqMu.Unlock()
	}
	t.acked.Add(1)
	t.kinds[r.kind].Add(1)
	t.owed.Add(int64(r.expected))
	t.paid.Add(got)
	for _, e := range early {
		t.deliveryAt(r, e.idx, e.s, e.at)
	}
	storeMax(&t.lastAck, int64(now))
	s.mu.Lock()
	s.ack[r.phase] = append(s.ack[r.phase], int64((now-r.sentAt)/time.Microsecond))
	s.mu.Unlock()
}

// failed records a publish refused by the server (a PUBACK >= 0x80, or an
// error event naming its clientMsgId).
func (t *tracker) failed(r *msgRec, code string) {
	r.mu.Lock()
	wasAcked := r.acked
	r.refused = true
	r.mu.Unlock()
	if wasAcked {
		// v3.1.1: acked, then refused by an error event.
		t.acked.Add(-1)
		t.owed.Add(-int64(r.expected))
	}
	t.refused.Add(1)
	t.noteErr(code)
}

// lost records a publish whose PUBACK never came (connection lost).
func (t *tracker) lost(err error) {
	t.unacked.Add(1)
	t.noteErr("no_puback: " + err.Error())
}

func (t *tracker) noteRetry(reason string) {
	t.errMu.Lock()
	t.retries[reason]++
	t.errMu.Unlock()
}

func (t *tracker) noteErr(code string) {
	t.errMu.Lock()
	t.errCodes[code]++
	if t.firstErr == "" {
		t.firstErr = code
	}
	t.errMu.Unlock()
}

// delivery records that client idx received message r; it reports false
// for a duplicate.
func (t *tracker) delivery(r *msgRec, idx int32, s *samples) bool {
	return t.deliveryAt(r, idx, s, t.now())
}

// bySeqOrLater finds the record of entry k; one whose PUBACK has not told
// its seq yet is credited with this delivery when it does (false).
func (t *tracker) bySeqOrLater(k convSeq, idx int32, s *samples) (*msgRec, bool) {
	if r, ok := t.bySeq.Load(k); ok {
		return r.(*msgRec), true
	}
	t.seqMu.Lock()
	defer t.seqMu.Unlock()
	if r, ok := t.bySeq.Load(k); ok {
		return r.(*msgRec), true
	}
	t.early[k] = append(t.early[k], earlyDelivery{idx: idx, s: s, at: t.now()})
	return nil, false
}

// unclaimed is the number of deliveries of entries no PUBACK claimed.
func (t *tracker) unclaimed() int64 {
	t.seqMu.Lock()
	defer t.seqMu.Unlock()
	n := 0
	for _, e := range t.early {
		n += len(e)
	}
	return int64(n)
}

func (t *tracker) deliveryAt(r *msgRec, idx int32, s *samples, now time.Duration) bool {
	r.mu.Lock()
	for _, x := range r.receivers {
		if x == idx {
			r.mu.Unlock()
			t.duplicates.Add(1)
			return false
		}
	}
	r.receivers = append(r.receivers, idx)
	acked := r.acked
	r.mu.Unlock()
	t.delivered.Add(1)
	if acked {
		t.paid.Add(1)
	} else {
		t.deliveredUnacked.Add(1)
	}
	storeMax(&t.lastDelivery, int64(now))
	s.mu.Lock()
	s.deliv = append(s.deliv, int64((now-r.sentAt)/time.Microsecond))
	s.mu.Unlock()
	return true
}

// pending is the number of deliveries owed for acknowledged messages that
// have not arrived yet.
func (t *tracker) pending() int64 { return t.owed.Load() - t.paid.Load() }

// samples are latency samples of one client, merged at the end so that the
// hot path takes no shared lock (mu is only contended across a reconnect).
type samples struct {
	mu    sync.Mutex
	ack   map[int32][]int64
	deliv []int64
	read  []int64
}

func newSamples() *samples { return &samples{ack: map[int32][]int64{}} }

func (t *tracker) merge(s *samples) {
	t.samplesMu.Lock()
	defer t.samplesMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for ph, v := range s.ack {
		t.ackLat[ph] = append(t.ackLat[ph], v...)
	}
	t.delivLat = append(t.delivLat, s.deliv...)
	t.readLat = append(t.readLat, s.read...)
}

// losses counts, over acknowledged messages, the members that never
// received them, and returns a few examples.
func (t *tracker) losses() (lost int64, examples []string) {
	t.byID.Range(func(id string, r *msgRec) bool {
		r.mu.Lock()
		miss := int64(r.expected) - int64(len(r.receivers))
		ok := r.acked && !r.refused
		seq := r.seq
		r.mu.Unlock()
		if ok && miss > 0 {
			lost += miss
			if len(examples) < 5 {
				examples = append(examples, formatLoss(id, r.conv, seq, miss))
			}
		}
		return true
	})
	return lost, examples
}

// recIndex maps clientMsgIds to their records, in shards of a map under a
// mutex each: sync.Map's Store allocates trie nodes, and the index takes
// a store per publish and a load per delivery.
type recIndex struct {
	shards [32]struct {
		mu sync.Mutex
		m  map[string]*msgRec
	}
}

var recIndexSeed = maphash.MakeSeed()

func (x *recIndex) shard(id string) int {
	return int(maphash.String(recIndexSeed, id) % uint64(len(x.shards)))
}

// Store records r under id.
func (x *recIndex) Store(id string, r *msgRec) {
	s := &x.shards[x.shard(id)]
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*msgRec{}
	}
	s.m[id] = r
	s.mu.Unlock()
}

// Load is the record of id.
func (x *recIndex) Load(id string) (*msgRec, bool) {
	s := &x.shards[x.shard(id)]
	s.mu.Lock()
	r, ok := s.m[id]
	s.mu.Unlock()
	return r, ok
}

// Range calls f for every record until f returns false; f must not
// store (it runs under a shard's lock).
func (x *recIndex) Range(f func(id string, r *msgRec) bool) {
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for id, r := range s.m {
			if !f(id, r) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// writeAckLog writes every acknowledged publish to path: its send time as
// Unix seconds and its PUBACK latency in microseconds (-ack-log).
func (t *tracker) writeAckLog(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create the ack log: %w", err)
	}
	w := bufio.NewWriter(f)
	t.byID.Range(func(_ string, r *msgRec) bool {
		r.mu.Lock()
		acked, sent, at := r.acked, r.sentAt, r.ackedAt
		r.mu.Unlock()
		if acked {
			fmt.Fprintf(w, "%.6f %d\n", float64(t.start.Add(sent).UnixMicro())/1e6, (at-sent)/time.Microsecond)
		}
		return true
	})
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write the ack log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the ack log: %w", err)
	}
	return nil
}
