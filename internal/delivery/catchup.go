package delivery

import (
	"context"
	"fmt"
	"time"

	chat "github.com/chatd/chatd"
)

// catchUp refills streams that are behind from two sources in turn: the
// hub's recent cache (encoded events the fan-out saw, no query), then
// PostgreSQL (the truth). A stream whose verify flag is set skips the
// cache. It belongs to one session pump.
type catchUp struct {
	hub       *Hub
	recentBuf []recentEntry
	ids       []int64
	ranges    []chat.Range
}

func newCatchUp(h *Hub) catchUp { return catchUp{hub: h} }

// release drops the scratch buffers (an idle session keeps none).
func (c *catchUp) release() { c.recentBuf, c.ids, c.ranges = nil, nil, nil }

// fill queues on s.pending what the sources hold for the streams behind
// (ascending ids), the cache first; PostgreSQL is asked only when the
// cache queued nothing, at most 64 streams per query.
func (c *catchUp) fill(s *Session, behind []int64) error {
	queued := false
	need := c.ids[:0]
	for _, id := range behind {
		st := s.streams[id]
		if !st.verify && st.end == 0 && c.fromRecent(s, id, st) {
			queued = true
			continue
		}
		if st.state == Behind {
			need = append(need, id)
		}
	}
	c.ids = need
	if queued || len(need) == 0 {
		return nil
	}
	return c.fromPostgreSQL(s, need)
}

// fromRecent queues what the recent cache holds from st.next on, up to
// st.until, and reports whether it queued anything. The cache holds what
// the fan-out routed to anyone; until is what was committed or routed to
// this session while the user was a member as far as it knows. Past it,
// an entry may have been routed after the user's leave, whose
// member.removed is still in the session's mailbox: PostgreSQL, which
// reads only as far as the membership goes, answers instead, or the
// entry's own offer, which raises until, comes first.
func (c *catchUp) fromRecent(s *Session, id int64, st *stream) bool {
	limit := c.hub.opts.FetchLimit
	if rest := st.until - st.next + 1; rest < int64(limit) {
		limit = int(max(rest, 0))
	}
	got, complete := c.hub.recent.get(c.recentBuf[:0], id, st.next, st.until, limit, st.slim(), st.floor)
	c.recentBuf = got
	for i, e := range got {
		it := item{kind: kMsg, conv: id, seq: st.next + int64(i), payload: e.payload, qos: 1, writer: e.writer}
		if e.at.After(s.started) {
			it.at = e.at
		}
		s.pending = append(s.pending, it)
	}
	n := len(got)
	clear(got)
	c.hub.opts.Metrics.RecentHits.Add(float64(n))
	s.pending = append(s.pending, st.filled(n, complete, true)...)
	return n > 0
}

// fromPostgreSQL reads the next events of up to 64 streams in one query;
// each gets an equal share of a budget of two windows (at least 16
// events, at most FetchLimit).
func (c *catchUp) fromPostgreSQL(s *Session, ids []int64) error {
	if len(ids) > 64 {
		ids = ids[:64]
	}
	opts := c.hub.opts
	limit := min(opts.FetchLimit, max(16, 2*opts.Window/len(ids)))
	c.ranges = c.ranges[:0]
	for _, id := range ids {
		// A stream ending (the user left) reads up to its end whatever
		// the membership; any other only while the user is a member.
		st := s.streams[id]
		c.ranges = append(c.ranges, chat.Range{ConversationID: id, After: st.next - 1, Until: st.end})
	}
	ctx, cancel := context.WithTimeout(c.hub.ctx, 10*time.Second)
	got, err := c.hub.store.SinceMany(ctx, s.UserID, c.ranges, limit)
	cancel()
	if err != nil {
		return err
	}
	for _, id := range ids {
		st := s.streams[id]
		msgs := got[id]
		if len(msgs) > 0 && msgs[0].Seq > st.next {
			// A hole: PostgreSQL read every entry after next-1 in seq
			// order, and holds none before this one (seqs are gapless,
			// but a row may be gone). Nothing will fill it; asking again
			// would only read the same answer at every wake-up, and the
			// stream would never move on.
			to := msgs[0].Seq
			if st.end > 0 {
				to = min(to, st.end+1) // what follows the end is not theirs
			}
			st.skip(to)
		}
		n := 0
		reachedEnd := false
		for _, m := range msgs {
			if m.Seq != st.next+int64(n) {
				break // a hole after what is queued: skipped at the next read
			}
			if st.end > 0 && m.Seq > st.end {
				reachedEnd = true // committed after the user left
				break
			}
			payload, err := encodeMessage(m, st.slim())
			if err != nil {
				return fmt.Errorf("catch up conversation %d: %w", id, err)
			}
			it := item{kind: kMsg, conv: id, seq: m.Seq, payload: payload, qos: 1, writer: m.Writer()}
			if m.CreatedAt.After(s.started) {
				// Committed while this session was online: the latency
				// metric counts it (a catch-up after time offline does not).
				it.at = m.CreatedAt
			}
			s.pending = append(s.pending, it)
			n++
		}
		opts.Metrics.Replayed.Add(float64(n))
		s.pending = append(s.pending, st.filled(n, reachedEnd || (n == len(msgs) && len(msgs) < limit), false)...)
	}
	return nil
}
