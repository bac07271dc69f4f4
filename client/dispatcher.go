package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// dispatcher turns the raw events stream into the application's: per
// conversation in seq order, each message once. One goroutine (run) owns
// the ordering; onPublish only appends to its queue, so the connection's
// reader never blocks and RPC replies keep flowing while run waits for a
// history fill.
type dispatcher struct {
	c   *Client
	out chan Event

	mu    sync.Mutex
	queue []queued
	wake  chan struct{}

	posMu sync.Mutex
	have  map[int64]int64 // highest contiguous seq handed on, per conversation
	start map[int64]int64 // Config.Positions not used yet
}

// queued is a raw event payload, or a request to catch up after a
// (re)connection.
type queued struct {
	payload []byte
	resync  bool
}

func newDispatcher(c *Client, positions map[int64]int64, buffer int) *dispatcher {
	d := &dispatcher{c: c, out: make(chan Event, buffer), wake: make(chan struct{}, 1),
		have: map[int64]int64{}, start: map[int64]int64{}}
	for conv, seq := range positions {
		d.start[conv] = seq
	}
	return d
}

// Events is the application's event stream. It is closed after Close.
// Read it promptly: the client buffers without bound behind it.
func (c *Client) Events() <-chan Event { return c.disp.out }

// Positions returns the highest seq handed on per conversation (including
// Config.Positions not used yet). Persist it and pass it back as
// Config.Positions to resume exactly after a restart.
func (c *Client) Positions() map[int64]int64 {
	d := c.disp
	d.posMu.Lock()
	defer d.posMu.Unlock()
	out := make(map[int64]int64, len(d.have)+len(d.start))
	for k, v := range d.start {
		out[k] = v
	}
	for k, v := range d.have {
		out[k] = v
	}
	return out
}

func (d *dispatcher) enqueue(payload []byte) { d.push(queued{payload: payload}) }

// resync asks for a catch-up through the inbox, in line with the events.
func (d *dispatcher) resync() { d.push(queued{resync: true}) }

func (d *dispatcher) push(q queued) {
	d.mu.Lock()
	d.queue = append(d.queue, q)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// next blocks for the next item; false once the client closes.
func (d *dispatcher) next() (queued, bool) {
	for {
		d.mu.Lock()
		if len(d.queue) > 0 {
			q := d.queue[0]
			d.queue[0] = queued{}
			d.queue = d.queue[1:]
			if len(d.queue) == 0 {
				d.queue = nil
			}
			d.mu.Unlock()
			return q, true
		}
		d.mu.Unlock()
		select {
		case <-d.wake:
		case <-d.c.life.Done():
			return queued{}, false
		}
	}
}

func (d *dispatcher) run() {
	defer close(d.out)
	for {
		q, ok := d.next()
		if !ok {
			return
		}
		if q.resync {
			d.catchUp()
		} else {
			d.handle(q.payload)
		}
	}
}

// handle applies one event from the events topic.
func (d *dispatcher) handle(payload []byte) {
	var w wireEvent
	if err := json.Unmarshal(payload, &w); err != nil {
		d.c.cfg.Logger.Warn("dropping an event that is not JSON", "err", err)
		return
	}
	ev := w.event()
	switch ev.Type {
	case EventMessageNew:
		d.message(ev, w.Body == nil)
	case EventMemberRemoved:
		if ev.UserID == d.c.cfg.UserID {
			d.forget(ev.ConversationID)
		}
		d.emit(ev)
	default:
		d.emit(ev)
	}
}

// message delivers message.new in order: duplicates are dropped, a gap (or
// a slim event without body) is filled through history first.
func (d *dispatcher) message(ev Event, slim bool) {
	conv, seq := ev.ConversationID, ev.Seq
	if conv <= 0 || seq <= 0 {
		return
	}
	h, known := d.position(conv)
	if !known {
		// First sight of this conversation: start here.
		if slim {
			d.setHave(conv, seq-1)
			d.fillUntil(conv, seq, ev, slim)
			return
		}
		d.emit(ev)
		d.setHave(conv, seq)
		return
	}
	if seq <= h {
		d.c.stats.duplicates.Add(1)
		return
	}
	if seq == h+1 && !slim {
		d.emit(ev)
		d.setHave(conv, seq)
		return
	}
	d.fillUntil(conv, seq, ev, slim)
}

// fillUntil fetches (have, seq] through history and hands it on; if
// history cannot provide seq, the live event is handed on anyway so that
// the stream does not stall.
func (d *dispatcher) fillUntil(conv, seq int64, ev Event, slim bool) {
	upto := seq
	if !slim {
		upto = seq - 1 // the live event itself needs no fetching
	}
	err := d.fill(conv, upto)
	if errors.Is(err, ErrClosed) {
		return
	}
	h, _ := d.position(conv)
	if h == seq-1 && !slim {
		d.emit(ev)
		d.setHave(conv, seq)
		return
	}
	if h < seq {
		d.c.cfg.Logger.Warn("history did not return a message the server announced; delivering the event as is",
			"conversation", conv, "seq", seq, "have", h, "err", err)
		if slim {
			ev.Body = ""
		}
		d.emit(ev)
		d.setHave(conv, seq)
	}
}

// fill fetches messages after the conversation's position through upto
// (inclusive) and hands them on.
func (d *dispatcher) fill(conv, upto int64) error {
	d.c.stats.gapFills.Add(1)
	for {
		h, _ := d.position(conv)
		if h >= upto {
			return nil
		}
		limit := int(min(upto-h, 200))
		msgs, err := d.history(conv, h, limit)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return errors.New("history returned no messages")
		}
		for _, m := range msgs {
			if m.Seq <= h {
				continue
			}
			d.c.stats.filled.Add(1)
			d.emit(messageEvent(m))
			h = m.Seq
			d.setHave(conv, h)
		}
	}
}

// history pages forward, retrying temporary failures (and rate limits)
// until the client closes; refusals (no longer a member, ...) end the fill.
func (d *dispatcher) history(conv, after int64, limit int) ([]Message, error) {
	delay := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(d.c.life, d.c.cfg.RequestTimeout)
		msgs, err := d.c.History(ctx, conv, HistoryOptions{AfterSeq: after, Limit: limit})
		cancel()
		if err == nil {
			return msgs, nil
		}
		if d.c.life.Err() != nil {
			return nil, ErrClosed
		}
		var e *Error
		if errors.As(err, &e) && !retryable(e) && !errors.Is(e, ErrRateLimited) {
			return nil, err
		}
		d.c.cfg.Logger.Debug("history fill failed; retrying", "conversation", conv, "err", err)
		if !sleepCtx(d.c.life, delay) {
			return nil, ErrClosed
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// catchUp runs after every (re)connection: conversations whose inbox
// lastSeq is ahead of what was handed on are filled through history. This
// covers whatever was missed while offline, whether or not the server kept
// a session.
func (d *dispatcher) catchUp() {
	d.posMu.Lock()
	tracked := len(d.have) + len(d.start)
	d.posMu.Unlock()
	if tracked == 0 {
		return
	}
	var entries []InboxEntry
	delay := 200 * time.Millisecond
	for {
		var err error
		entries, err = d.inboxAll()
		if err == nil {
			break
		}
		if d.c.life.Err() != nil {
			return
		}
		if !d.c.Connected() {
			// The next connection queues another catch-up.
			return
		}
		d.c.cfg.Logger.Warn("catch-up: inbox failed; retrying", "err", err)
		if !sleepCtx(d.c.life, delay) {
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
	for _, e := range entries {
		if h, known := d.position(e.ID); known && e.LastSeq > h {
			if err := d.fill(e.ID, e.LastSeq); err != nil {
				if errors.Is(err, ErrClosed) {
					return
				}
				d.c.cfg.Logger.Warn("catch-up: history fill failed", "conversation", e.ID, "err", err)
			}
		}
	}
}

func (d *dispatcher) inboxAll() ([]InboxEntry, error) {
	var all []InboxEntry
	cursor := ""
	for {
		ctx, cancel := context.WithTimeout(d.c.life, d.c.cfg.RequestTimeout)
		page, err := d.c.Inbox(ctx, InboxOptions{Limit: 200, Cursor: cursor})
		cancel()
		if err != nil {
			return nil, err
		}
		all = append(all, page.Conversations...)
		if page.NextCursor == "" || len(page.Conversations) == 0 {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// position returns the conversation's position, taking it from
// Config.Positions on first use.
func (d *dispatcher) position(conv int64) (int64, bool) {
	d.posMu.Lock()
	defer d.posMu.Unlock()
	if h, ok := d.have[conv]; ok {
		return h, true
	}
	if h, ok := d.start[conv]; ok {
		delete(d.start, conv)
		d.have[conv] = h
		return h, true
	}
	return 0, false
}

func (d *dispatcher) setHave(conv, seq int64) {
	d.posMu.Lock()
	d.have[conv] = seq
	d.posMu.Unlock()
}

func (d *dispatcher) forget(conv int64) {
	d.posMu.Lock()
	delete(d.have, conv)
	delete(d.start, conv)
	d.posMu.Unlock()
}

// emit hands ev to the application, waiting for room.
func (d *dispatcher) emit(ev Event) {
	select {
	case d.out <- ev:
		d.c.stats.delivered.Add(1)
	case <-d.c.life.Done():
	}
}

// sleepCtx sleeps d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
