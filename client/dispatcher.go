package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	chat "github.com/chatd/chatd"
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
	// sent is, per conversation, the highest seq of the user's own
	// changes (messages, edits, recalls, reactions) that a caller was
	// told by Send, Apply or Commit in this run: the application knows
	// those seqs, whether or not Events carried their entries yet (see
	// waitsForEntries). Written by the send loops.
	sent map[int64]int64

	// Catch-up state, owned by run's goroutine. targets are the inbox
	// lastSeqs, per conversation, that have to be reached after a
	// reconnection; on a persistent session the server replays them
	// itself, so they are filled through history only for conversations
	// that show no progress (see checkTargets).
	targets map[int64]int64
	// left is the position of each conversation the user was removed
	// from when it was forgotten: a redelivery of what was handed on
	// before is a duplicate still, not the first sight of it. It is -1
	// for one that had none (no entry of it came, and no join was
	// noted): there is nothing to go on from when the user is added back.
	left map[int64]int64
	// gone holds the conversations a catch-up found the user no longer
	// in (forgetLeft): on a persistent session chatd may still be
	// replaying what the leave owed, and those entries are handed on
	// without tracking the conversation again, since no member.removed
	// will come to forget it. The user's member.added (or its entry, the
	// event being dropped: see ownJoin), or an inbox that lists it, ends
	// that.
	gone map[int64]bool
	// owed is, per gone conversation that a live member.removed
	// dropped, that event's seq: the leave owes entries up to it
	// only, and chatd sends a later one to members alone, so one after it
	// tells that the user was added back (while offline: no member.added
	// is replayed).
	owed map[int64]int64
	// joined is, per conversation without a position, the seq after
	// which its entries are the user's and none has been handed on: for
	// one they became a member of live, where that membership starts
	// (conversation.created listing them: 0; their member.added: its
	// seq); for one an inbox read listed, its lastSeq then. Without a
	// server session nothing is replayed: a connection lost before the
	// first entry came would otherwise take the first live one after the
	// reconnection for the start, and what was written meanwhile would
	// never be handed on. The catch-up tracks such a conversation from
	// there (trackJoined); an entry that comes first starts it, as on a
	// new session.
	joined map[int64]int64
	// listed holds the conversations the last inbox read of a
	// connection without a server session listed (nil before the
	// first). One that a later read lists, and that has no position,
	// was joined while the connection was down: see trackNew.
	listed map[int64]bool
	// liveAt is, per conversation, the number (of live) of the user's
	// last member.added or member.removed of it. A catch-up's inbox read
	// notes live when it starts: a membership change that arrived since
	// is newer than the read, which must not undo it. One entry per
	// conversation the user joined or left during this run.
	live       uint64
	liveAt     map[int64]uint64
	syncAt     time.Time           // last (re)connection of a persistent session
	seenAt     map[int64]time.Time // last message.new received, per conversation
	anySeen    time.Time           // last message.new received
	checkTimer *time.Timer
	// asks holds, per conversation whose join entry chatd is being asked
	// about (askJoin), that entry and the conversation's events that
	// came after it, in order: they wait for the answer, the other
	// conversations' events do not.
	asks map[int64]*joinAsk
	// told is the answer whose held events are being handled again
	// (answered): the join entry it is about takes it instead of asking.
	told *joinAnswer
}

// joinAsk is a conversation's events held while chatd is asked whether
// the first, the user's own member.added entry, starts their current
// membership.
type joinAsk struct {
	seq  int64 // the join entry's
	held []heldEvent
}

// heldEvent is an event of a conversation held by a joinAsk: from the
// events topic (with slim, see message), or the client's own.
type heldEvent struct {
	ev   Event
	slim bool
	own  bool
}

// joinAnswer is joinsNow's answer about the join entry seq of conv.
type joinAnswer struct {
	conv, seq int64
	starts    bool
}

// queued is a raw event payload, a request to catch up after a
// (re)connection, the inbox lastSeqs to catch up to, or a request to look
// at those again.
type queued struct {
	payload []byte
	resync  bool
	at      time.Time       // resync: when the connection came up
	targets map[int64]int64 // catch-up targets from the inbox
	tracked []int64         // targets: the conversations tracked before the inbox read
	since   uint64          // targets: live when the inbox read started
	check   bool
	event   *Event // the client's own event for the application
	stop    bool   // event: the client stopped connecting (Client.Err)
	answer  *joinAnswer
	// hold, while in the queue, keeps everything queued after it from
	// being handled: see holdForCatchUp.
	hold *hold
}

// hold marks a connection's place in the queue until its catch-up is
// queued there. It is not zero-sized: each hold is a distinct pointer.
type hold struct{ _ byte }

// On a persistent session chatd replays what was missed by itself
// (docs/protocol.md "Sessions and delivery guarantees"). After a
// reconnection the client therefore fills a conversation that is behind
// its inbox lastSeq through history only once the conversation has shown
// no progress for replayGrace and either the whole event stream has been
// quiet as long or replayMaxWait has passed since the reconnection.
var (
	replayGrace   = 1500 * time.Millisecond
	replayMaxWait = 5 * time.Second
)

// The catch-up reads the inbox inboxPage conversations a page (chatd's
// cap), in at most inboxRounds passes (see inboxAll).
const (
	inboxPage   = 200
	inboxRounds = 5
)

func newDispatcher(c *Client, positions map[int64]int64, buffer int) *dispatcher {
	d := &dispatcher{c: c, out: make(chan Event, buffer), wake: make(chan struct{}, 1),
		have: map[int64]int64{}, start: map[int64]int64{}, sent: map[int64]int64{},
		targets: map[int64]int64{}, left: map[int64]int64{}, gone: map[int64]bool{}, owed: map[int64]int64{},
		joined: map[int64]int64{}, liveAt: map[int64]uint64{},
		seenAt: map[int64]time.Time{}, asks: map[int64]*joinAsk{}}
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
// Config.Positions to resume exactly after a restart: an event is in it
// by the time Events carries it. After Close it covers exactly what
// Events carried (drain the closed channel to process the rest): an
// event the closing client did not hand on is not counted.
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

// holdForCatchUp marks where a connection that came up starts in the
// queue, before it subscribes: chatd sends events as soon as the
// subscription is in, and those of the new connection must wait for its
// catch-up. Until then the catch-up has not read the inbox, which ends
// the gone mark of a conversation the user was added back to while
// offline; handed on before it, its first message would be taken for
// what the leave owed and leave it untracked. release ends the hold.
func (d *dispatcher) holdForCatchUp() *hold {
	h := &hold{}
	d.push(queued{hold: h})
	return h
}

// release ends hold h: with catchUp, a catch-up (through the inbox, in
// line with the events) takes its place, ahead of what came after it;
// else (the subscription failed) it is dropped.
func (d *dispatcher) release(h *hold, at time.Time, catchUp bool) {
	d.mu.Lock()
	if i := slices.IndexFunc(d.queue, func(q queued) bool { return q.hold == h }); i >= 0 {
		if catchUp {
			d.queue[i] = queued{resync: true, at: at}
		} else {
			d.queue = slices.Delete(d.queue, i, i+1)
		}
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) push(q queued) {
	d.mu.Lock()
	d.queue = append(d.queue, q)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// next blocks for the next item, or while the first is a hold; false
// once the client closes.
func (d *dispatcher) next() (queued, bool) {
	for {
		d.mu.Lock()
		if len(d.queue) > 0 && d.queue[0].hold == nil {
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
	defer func() {
		if d.checkTimer != nil {
			d.checkTimer.Stop()
		}
	}()
	for {
		q, ok := d.next()
		if !ok {
			return
		}
		switch {
		case q.resync:
			d.catchUp(q.at)
		case q.targets != nil:
			d.forgetLeft(q.tracked, q.targets, q.since)
			d.addTargets(q.targets)
			if h := d.c.catchUpHook.Load(); h != nil {
				(*h)()
			}
			d.checkTargets()
		case q.check:
			d.checkTargets()
		case q.event != nil:
			if q.stop {
				d.stopped()
			}
			d.own(*q.event)
		case q.answer != nil:
			d.answered(*q.answer)
		default:
			d.handle(q.payload)
		}
	}
}

// handle applies one event from the events topic.
func (d *dispatcher) handle(payload []byte) {
	var w chat.Event
	if err := json.Unmarshal(payload, &w); err != nil {
		d.c.cfg.Logger.Warn("dropping an event that is not JSON", "err", err)
		return
	}
	d.apply(eventOf(w), slim(w))
}

// apply applies one event from the events topic (slim: see message),
// unless its conversation's events are held (asks): then it waits there.
func (d *dispatcher) apply(ev Event, slim bool) {
	if a := d.asks[ev.ConversationID]; a != nil && d.waitsForEntries(ev, a.seq) {
		if isEntry(ev.Type) {
			// Activity on the events topic: see checkTargets.
			now := time.Now()
			d.seenAt[ev.ConversationID] = now
			d.anySeen = now
		}
		a.held = append(a.held, heldEvent{ev: ev, slim: slim})
		return
	}
	switch {
	case isEntry(ev.Type):
		d.message(ev, slim)
	case ev.Type == EventMemberRemoved:
		if ev.UserID == d.c.cfg.UserID && ev.ConversationID > 0 {
			// chatd may still send what the leave owes (entries up to
			// ev.Seq that had not reached this connection): handed on
			// as the user's, without tracking the conversation again.
			// A membership whose join was noted and no entry of which
			// came is left at that join.
			j, joined := d.joined[ev.ConversationID]
			d.forget(ev.ConversationID)
			if joined {
				d.left[ev.ConversationID] = max(d.left[ev.ConversationID], j)
			}
			delete(d.joined, ev.ConversationID)
			d.gone[ev.ConversationID] = true
			// chatd's member.removed always says the conversation's last
			// seq at the leave, and omits it when 0 (no entry yet): a
			// missing seq is 0 here.
			d.owed[ev.ConversationID] = ev.Seq
			d.changedLive(ev.ConversationID)
		}
		d.emit(ev)
	case ev.Type == EventMemberAdded:
		if ev.UserID == d.c.cfg.UserID {
			d.addedLive(ev.ConversationID)
			d.noteJoined(ev.ConversationID, ev.Seq)
		}
		d.emit(ev)
	case ev.Type == EventConversationCreated:
		if slices.Contains(ev.Members, d.c.cfg.UserID) {
			d.noteJoined(ev.ConversationID, ev.Seq)
		}
		d.emit(ev)
	default:
		d.emit(ev)
	}
}

// waitsForEntries reports whether ev, of a conversation whose join entry
// (at seq join) chatd is being asked about (askJoin), waits with the
// conversation's entries for the answer, which can take 3 request
// timeouts (45 s by default), rather than going on at once. Only what
// the held entries' order bears on waits:
//   - the entries (message.*, reaction.updated, system.new): their order
//     and the join entry's answer decide whether and where they go on;
//   - member.added, member.removed, member.updated, conversation.created
//     and conversation.updated: membership and settings, each also a
//     system.new entry of the stream, so that shown before the held
//     entries they would be undone by older ones; the user's own
//     membership events also decide what the held entries are (owed to
//     an ended membership, or the start of a new one);
//   - error (chatd's, or the client's refusal of a send there): a refusal
//     such as not_member follows the removal that explains it;
//   - a read.updated or delivery.updated naming a seq at or above the
//     join entry's, unless the application was told that seq (below);
//   - a type this client does not know: its order may matter.
//
// Typing goes on at once: it is of now, and held it came up to that
// long late, someone typing long after they stopped. So do read.updated
// and delivery.updated that name a seq the application has: below the
// join entry's, an entry handed on already (the held ones start at the
// join entry), or at most the highest seq of the user's own changes
// that Send, Apply or Commit returned there in this run (sent). Neither
// is an entry of the stream (docs/protocol.md: live notifications, not
// replayed), and held they showed a message unread or undelivered long
// after it was read or delivered. One naming a seq the application has
// not been handed waits: docs/protocol.md promises that a receipt comes
// after its entry, and ahead of it an application that counts unread as
// last seq minus read seq would count below zero, and one that ignores
// the events of a conversation it does not know yet (its member.added,
// held too) would lose the watermark for good, since receipts are not
// replayed. The user's own sends go on at once although their entries
// (the copies chatd sends its user) are held: the application has their
// seqs from the call that sent them, counts and shows the message from
// it, and knows the conversation it sent to, so none of that can go
// wrong; and delivery.updated, which chatd sends only to a sender about
// their messages, is what shows them delivered. A receipt of a send
// whose call did not return its seq (recovered from SessionDir, or its
// context ended: ErrQueued) waits, as the application learns of that
// send from its entry. Presence and profile.updated belong to no
// conversation and are never held.
func (d *dispatcher) waitsForEntries(ev Event, join int64) bool {
	switch ev.Type {
	case EventTyping, EventPresence, EventProfileUpdated:
		return false
	case EventReadUpdated, EventDeliveryUpdated:
		return ev.Seq >= join && ev.Seq > d.sentSeq(ev.ConversationID)
	}
	return true
}

// noteSent records that a caller was told seq, of the user's own change
// in conv (see sent).
func (d *dispatcher) noteSent(conv, seq int64) {
	d.posMu.Lock()
	d.sent[conv] = max(d.sent[conv], seq)
	d.posMu.Unlock()
}

func (d *dispatcher) sentSeq(conv int64) int64 {
	d.posMu.Lock()
	defer d.posMu.Unlock()
	return d.sent[conv]
}

// own hands on an event of the client's own (an error), after the held
// events of its conversation if there are any.
func (d *dispatcher) own(ev Event) {
	if a := d.asks[ev.ConversationID]; a != nil {
		a.held = append(a.held, heldEvent{ev: ev, own: true})
		return
	}
	d.emit(ev)
}

// addedLive notes that the user was added to conv live: a member again,
// tracked from its events.
func (d *dispatcher) addedLive(conv int64) {
	delete(d.gone, conv)
	delete(d.owed, conv)
	d.changedLive(conv)
}

// ownJoin reports whether entry ev is the system entry of the user's own
// member.added: the first entry of their membership.
func (d *dispatcher) ownJoin(ev Event) bool {
	return ev.Type == EventSystemNew && ev.Action == string(chat.SystemMemberAdded) && ev.UserID == d.c.cfg.UserID
}

// joinsNow reports whether the user's current membership of conv starts
// at its entry seq, their own member.added (ownJoin): chatd answers the
// conversation with its JoinSeq, the seq before that entry. The entry
// may be of a membership that ended instead: a persistent session that
// was offline while the user was added back and removed again is owed
// that membership's entries, and replays them after the catch-up's
// inbox (which found the user gone) when it is slow to come; tracked
// from it, the conversation would be the user's again, though no
// member.removed will come to forget it. A refusal (not a member) is no.
//
// It runs on a goroutine of its own (askJoin), the entry and the
// conversation's events after it waiting for its answer, which takes up
// to joinAsks times Config.RequestTimeout: it asks joinAsks times at
// most, and not at all once the client stopped connecting (Client.Err:
// no answer will come); then the entry is taken for the
// start of the current membership, the cheaper of the two wrong
// guesses. A group tracked that the user is not in stays at the last
// entry its ended membership owed (chatd sends nothing after it) until
// the next inbox read, which no longer lists it and forgets it: the
// catch-up of the next connection, or of the next client given these
// Positions. Nothing is lost. A group dropped that the user is in has
// its entries handed on untracked until an inbox read lists it again,
// which only a reconnection brings: in between an entry lost on the way
// is never filled, and Positions leaves the group out, so that a client
// resuming from them takes it up again at whatever entry comes first.
func (d *dispatcher) joinsNow(conv, seq int64) bool {
	pause := newRetryPause(5 * time.Second)
	for ask := 1; ; ask++ {
		ctx, cancel := context.WithTimeout(d.c.life, d.c.cfg.RequestTimeout)
		c, err := d.c.Conversation(ctx, conv)
		cancel()
		if err == nil {
			return c.JoinSeq == seq-1
		}
		if d.c.life.Err() != nil {
			return false // closed: nothing more is handed on
		}
		if d.c.Err() != nil {
			return true // stopped (not err's chain: see historyPage)
		}
		if fillRefused(err) {
			return false
		}
		if ask == joinAsks {
			d.c.cfg.Logger.Warn("could not ask chatd whether the user is back in a conversation; taking its join entry for the start of their membership",
				"conversation", conv, "seq", seq, "err", err)
			return true
		}
		d.c.cfg.Logger.Debug("reading a conversation the user may be back in failed; retrying", "conversation", conv, "err", err)
		if !pause.wait(d.c.life, err) {
			return false
		}
	}
}

// joinAsks bounds joinsNow's questions: each lasts up to
// Config.RequestTimeout, with the conversation's events waiting.
const joinAsks = 3

// askJoin holds join entry ev (slim: see message) of a conversation the
// catch-up found the user gone from, and the conversation's events that
// come after it (apply, own), while chatd is asked whether it starts
// their current membership (joinsNow), on a worker goroutine: the other
// conversations' events go on meanwhile. The answer, queued behind the
// events that came meanwhile, hands them on again in order (answered).
// Close ends the question; the held events are not handed on.
func (d *dispatcher) askJoin(ev Event, slim bool) {
	conv, seq := ev.ConversationID, ev.Seq
	d.asks[conv] = &joinAsk{seq: seq, held: []heldEvent{{ev: ev, slim: slim}}}
	d.c.workers.Add(1) // run's goroutine is a worker itself: not zero here
	go func() {
		defer d.c.workers.Done()
		starts := d.joinsNow(conv, seq)
		if d.c.life.Err() != nil {
			return
		}
		d.push(queued{answer: &joinAnswer{conv: conv, seq: seq, starts: starts}})
	}()
}

// answered ends the hold of a's conversation: its events are applied
// again in the order they came, the join entry taking a's answer (unless
// what came meanwhile, a catch-up that found the user back, decided it
// already). An event among them may hold the ones after it again (the
// join entry of a later membership). A catch-up fill of the conversation
// that waited for the answer (checkTargets) runs after them.
func (d *dispatcher) answered(a joinAnswer) {
	ask := d.asks[a.conv]
	if ask == nil || ask.seq != a.seq {
		return // answered already, when the client stopped connecting
	}
	delete(d.asks, a.conv)
	d.told = &a
	for _, h := range ask.held {
		if h.own {
			d.own(h.ev)
		} else {
			d.apply(h.ev, h.slim)
		}
	}
	d.told = nil
	if _, ok := d.targets[a.conv]; ok && d.asks[a.conv] == nil {
		d.checkTargets()
	}
}

// stopped ends, as the client stops connecting and before its error
// event is handed on, every question about a join entry under way: each
// takes the entry for the start of the membership, as joinsNow answers
// once the client stopped, and its conversation's held events go on in
// the order they came. They came before the stop, as the other
// conversations' events handed on before it did: an application that
// saw the error event and then more entries would take them for events
// of a client that had stopped. The questions' own answers, which come
// later, find nothing to answer.
func (d *dispatcher) stopped() {
	for len(d.asks) > 0 {
		conv := slices.Min(slices.Collect(maps.Keys(d.asks)))
		d.answered(joinAnswer{conv: conv, seq: d.asks[conv].seq, starts: true})
	}
}

// noteJoined records that the user became a member of conv live, from
// after seq (see joined), unless the conversation has a position: its
// entries then go on from there. Only without a server session: a
// persistent one replays what the membership missed, after what an
// earlier membership may still owe (entries at or below seq, which a
// position at seq would drop as duplicates).
func (d *dispatcher) noteJoined(conv, seq int64) {
	if conv <= 0 || d.c.cfg.persistent {
		return
	}
	if _, known := d.position(conv); !known {
		d.joined[conv] = seq
	}
}

// trackJoined gives each conversation joined live that still has no
// position (no entry of it came) the position its membership starts
// after, so that the catch-up fills what was written since through
// history. Nothing owed by an earlier membership comes after it on a
// connection without a server session.
func (d *dispatcher) trackJoined() {
	for conv, seq := range d.joined {
		if _, known := d.position(conv); !known {
			delete(d.left, conv)
			d.setHave(conv, seq)
		}
	}
	clear(d.joined)
}

// changedLive notes a live change of the user's membership of conv.
func (d *dispatcher) changedLive(conv int64) {
	d.live++
	d.liveAt[conv] = d.live
}

// message delivers an entry (message.new or a change of a message) in
// order: duplicates are dropped, a gap (or a slim event without its
// content) is filled through history first.
func (d *dispatcher) message(ev Event, slim bool) {
	conv, seq := ev.ConversationID, ev.Seq
	if conv <= 0 || seq <= 0 {
		return
	}
	// Activity on the events topic (the server's replay, or live
	// traffic), as opposed to what history brings: see checkTargets.
	now := time.Now()
	d.seenAt[conv] = now
	d.anySeen = now
	h, known := d.position(conv)
	if !known {
		if f, ok := d.left[conv]; ok {
			if seq <= f {
				d.c.stats.duplicates.Add(1)
				return
			}
			if d.gone[conv] {
				owed, owes := d.owed[conv]
				if owes && seq > owed {
					// Past what the leave owed: a member again. Tracked
					// from the leave, as a catch-up whose inbox lists it
					// would, so that the entries between (written while
					// the user was away, in a group whose history is
					// "all") come from history first.
					d.changedLive(conv)
					d.readded(conv)
					d.message(ev, slim)
					return
				}
				starts := false
				if !owes && d.ownJoin(ev) {
					// chatd is asked on the side (askJoin); the entry
					// comes back here with the answer (answered). A
					// client that stopped connecting asks nothing: no
					// answer will come, and the entry is taken for the
					// start (see joinsNow).
					switch a := d.told; {
					case a != nil && a.conv == conv && a.seq == seq:
						starts = a.starts
					case d.c.Err() != nil:
						starts = true
					default:
						d.askJoin(ev, slim)
						return
					}
				}
				if !starts {
					// What the leave owed, replayed after the catch-up
					// found the user gone: theirs, but not tracked.
					if d.emit(ev) {
						d.left[conv] = seq
					}
					return
				}
				// The entry of the user's own member.added that starts
				// their current membership, where no owed seq tells
				// where the leave's entries end (the catch-up found the
				// user gone): it stands for the member.added event,
				// which chatd drops with the other live events past a
				// session's queue (an entry it never drops), and the
				// conversation is tracked from it, as after that event.
				d.addedLive(conv)
			}
			delete(d.left, conv)
		}
		// First sight of this conversation: start here.
		delete(d.joined, conv)
		if slim {
			d.setHave(conv, seq-1)
			d.fillUntil(conv, seq, ev, slim)
			return
		}
		d.handOn(ev, conv, seq)
		return
	}
	if seq <= h {
		d.c.stats.duplicates.Add(1)
		return
	}
	if seq == h+1 && !slim {
		d.handOn(ev, conv, seq)
		return
	}
	d.fillUntil(conv, seq, ev, slim)
}

// fillUntil fetches (have, seq] through history and hands it on, then the
// live event. It keeps trying (with backoff, inside fill) until the range
// is filled or the client closes or stops connecting: later events are
// never handed on while an earlier gap is open. Only a refusal for good
// (no longer a member, ...) ends it; the event is then dropped, since
// what precedes it cannot be delivered.
func (d *dispatcher) fillUntil(conv, seq int64, ev Event, slim bool) {
	upto := seq
	if !slim {
		upto = seq - 1 // the live event itself needs no fetching
	}
	err := d.fill(conv, upto)
	if fillEnded(err) {
		return
	}
	if err != nil {
		d.c.cfg.Logger.Warn("history refused to fill a gap; dropping the event after it",
			"conversation", conv, "seq", seq, "err", err)
		return
	}
	if h, _ := d.position(conv); h == seq-1 && !slim {
		d.handOn(ev, conv, seq)
	}
}

// fill fetches messages after the conversation's position through upto
// (inclusive) and hands them on, in order and without gaps. Temporary
// failures (errors, rate limits, an empty or incomplete page) are retried
// with backoff until the range is filled or the client closes or stops
// connecting; it returns nil once filled, ErrClosed, the error the client
// stopped with (see historyPage), or a refusal for good.
func (d *dispatcher) fill(conv, upto int64) error {
	d.c.stats.gapFills.Add(1)
	pause := newRetryPause(5 * time.Second)
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
		progressed := false
		for _, m := range msgs {
			if m.Seq <= h {
				continue
			}
			if m.Seq != h+1 {
				// A page that does not continue at h+1 (a server that
				// reads afterSeq=0 as "newest") would skip messages.
				break
			}
			if !d.handOn(messageEvent(m), conv, m.Seq) {
				return ErrClosed
			}
			d.c.stats.filled.Add(1)
			h = m.Seq
			progressed = true
		}
		if progressed {
			pause = newRetryPause(5 * time.Second)
			continue
		}
		if i := slices.IndexFunc(msgs, func(m Message) bool { return m.Seq > h }); i >= 0 {
			// The page does not continue at h+1. If nothing between h and
			// its first entry is readable (a page backwards from it is
			// empty down to h), those entries are below the reader's
			// history floor (a group whose history is "joined" that they
			// were removed from and added to again): skip them. Else, at
			// h = 0, the server read afterSeq=0 as "the newest page":
			// page backwards down to seq 1.
			first := msgs[i].Seq
			below, err := d.historyPage(conv, HistoryOptions{BeforeSeq: first, Limit: 1})
			if err != nil {
				return err
			}
			if len(below) == 0 || below[len(below)-1].Seq <= h {
				d.setHave(conv, min(first-1, upto))
				continue
			}
			if h == 0 {
				if err := d.fillFromStart(conv, first, upto); err != nil {
					return err
				}
				if h2, _ := d.position(conv); h2 > h {
					continue
				}
			}
		}
		d.c.cfg.Logger.Warn("history did not return the next message yet; retrying",
			"conversation", conv, "after", h, "upto", upto, "got", len(msgs))
		if !pause.wait(d.c.life, nil) {
			return ErrClosed
		}
	}
}

// fillFromStart hands on seqs 1..min(below-1, upto) of a conversation whose
// position is 0, paging backwards from below (for servers on which
// afterSeq=0 means "the newest page").
func (d *dispatcher) fillFromStart(conv, below, upto int64) error {
	var pages [][]Message
	for before := below; before > 1; {
		msgs, err := d.historyPage(conv, HistoryOptions{BeforeSeq: before, Limit: int(min(before-1, 200))})
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			break
		}
		pages = append(pages, msgs)
		before = msgs[0].Seq
	}
	h := int64(0)
	for i := len(pages) - 1; i >= 0; i-- {
		for _, m := range pages[i] {
			if m.Seq > upto {
				return nil
			}
			if m.Seq != h+1 {
				return nil // incomplete: fill retries
			}
			if !d.handOn(messageEvent(m), conv, m.Seq) {
				return ErrClosed
			}
			d.c.stats.filled.Add(1)
			h = m.Seq
		}
	}
	return nil
}

// history pages forward from after (also from 0: the request says so
// explicitly).
func (d *dispatcher) history(conv, after int64, limit int) ([]Message, error) {
	return d.historyPage(conv, HistoryOptions{AfterSeq: after, Forward: true, Limit: limit})
}

// historyPage retries every failure but a refusal for good (see
// fillRefused) until the client closes (ErrClosed) or stops connecting
// (Client.Err, returned as it is: no answer will come, and the events
// queued behind the fill, among them the error event that says so, would
// wait for ever). Either ends the fill as Close does (fillEnded): what it
// could not fill, and the entry after it, are not handed on, so Positions
// still says where a next client has to go on from.
func (d *dispatcher) historyPage(conv int64, o HistoryOptions) ([]Message, error) {
	pause := newRetryPause(5 * time.Second)
	for {
		var msgs []Message
		var err error
		if h := d.c.historyHook.Load(); h != nil {
			msgs, err = (*h)(conv, o)
		} else {
			ctx, cancel := context.WithTimeout(d.c.life, d.c.cfg.RequestTimeout)
			msgs, err = d.c.History(ctx, conv, o)
			cancel()
		}
		if err == nil {
			return msgs, nil
		}
		if d.c.life.Err() != nil {
			return nil, ErrClosed
		}
		// Client.Err, not err's chain: a call that timed out while a
		// client with TokenFunc reconnects wraps the last attempt's
		// refusal, which matches ErrUnauthorized, though the next token
		// may be accepted and the fill go on.
		if stop := d.c.Err(); stop != nil {
			return nil, stop
		}
		if fillRefused(err) {
			return nil, err
		}
		d.c.cfg.Logger.Debug("history fill failed; retrying", "conversation", conv, "err", err)
		if !pause.wait(d.c.life, err) {
			return nil, ErrClosed
		}
	}
}

// fillEnded reports whether a fill ended because the client closed or
// stopped connecting, as opposed to filled (nil) or refused for good.
func fillEnded(err error) bool {
	return errors.Is(err, ErrClosed) || stoppedBy(err)
}

// fillRefused reports whether a history failure is for good: the user
// cannot read the conversation (any more), or the request is wrong.
// Everything else (unavailable, rate limited, busy, timeouts, lost
// connections, unknown codes) is worth retrying.
func fillRefused(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return errors.Is(e, ErrNotMember) || errors.Is(e, ErrNotFound) || errors.Is(e, ErrForbidden) || errors.Is(e, ErrInvalid)
}

// catchUp runs after every (re)connection (at is when it came up): the
// conversations whose inbox lastSeq is ahead of what was handed on have to
// catch up to it. This covers whatever was missed while offline, whether or
// not the server kept a session.
//
// Without a server session nothing is replayed: the inbox is read here, in
// line with the events, and the differences are filled through history at
// once. On a persistent session chatd replays the missed messages itself,
// so the inbox is read in the background while the replay is handed on,
// and checkTargets fills only what the replay does not bring.
//
// A tracked conversation missing from the inbox is one the user left or
// was removed from meanwhile (member.removed is not replayed): its
// position is forgotten, as a live member.removed forgets it.
func (d *dispatcher) catchUp(at time.Time) {
	d.trackJoined()
	d.posMu.Lock()
	tracked := make([]int64, 0, len(d.have)+len(d.start))
	for conv := range d.have {
		tracked = append(tracked, conv)
	}
	for conv := range d.start {
		tracked = append(tracked, conv)
	}
	d.posMu.Unlock()
	if len(tracked) == 0 && len(d.gone) == 0 && d.c.cfg.persistent {
		// Nothing to catch up, and no gone mark for an inbox that
		// lists the conversation again to end (a re-add while offline
		// brings no member.added). Without a server session the inbox
		// is read all the same: it tells the conversations joined
		// while offline (trackNew).
		return
	}
	since := d.live
	if !d.c.cfg.persistent {
		entries, ok := d.inboxRetry()
		if !ok {
			return
		}
		t := inboxTargets(entries)
		d.forgetLeft(tracked, t, since)
		d.trackNew(entries)
		d.addTargets(t)
		d.checkTargets()
		return
	}
	d.syncAt = at
	d.c.workers.Add(1) // run's goroutine is a worker itself: not zero here
	go func() {
		defer d.c.workers.Done()
		entries, ok := d.inboxRetry()
		if !ok {
			return
		}
		t := inboxTargets(entries)
		d.push(queued{targets: t, tracked: tracked, since: since})
	}()
}

// forgetLeft forgets the conversations of tracked (those tracked before
// the inbox was read) that the inbox does not list: the user is no longer
// a member. One the user joins after the read starts from its first event
// again, as a new one does. since is live when the read started: a
// conversation whose membership changed live after that is left as that
// change made it (the read, older, would undo a removal or a re-add).
func (d *dispatcher) forgetLeft(tracked []int64, inbox map[int64]int64, since uint64) {
	for conv := range d.gone {
		if _, ok := inbox[conv]; ok && d.liveAt[conv] <= since {
			d.readded(conv)
		}
	}
	for _, conv := range tracked {
		if _, ok := inbox[conv]; !ok && d.liveAt[conv] <= since {
			d.forget(conv)
			d.gone[conv] = true
			delete(d.owed, conv) // what the leave owed is not known
		}
	}
}

// trackNew takes each conversation of an inbox read (entries) on a
// connection without a server session that has no position nor a leave
// noted as the user's from where they have not had its entries yet. One
// that the previous read of this run did not list the user joined while
// the connection was down, so no conversation.created or member.added
// told it, and nothing is replayed: everything written since the join
// (the entry's JoinSeq) is theirs, and the catch-up fills it before the
// first live entry. One the previous read listed too (or that the
// first read of the run lists) is theirs after its lastSeq now, unless
// a join noted live says more: an entry that comes first starts it, as
// on a new session, and else the next catch-up tracks it from there
// (joined), so that what was written while the connection was down is
// handed on, and a leave before any entry came is at that seq.
func (d *dispatcher) trackNew(entries []InboxEntry) {
	prev := d.listed
	d.listed = make(map[int64]bool, len(entries))
	for _, e := range entries {
		d.listed[e.ID] = true
	}
	for _, e := range entries {
		if _, known := d.position(e.ID); known {
			continue
		}
		if _, ok := d.left[e.ID]; ok {
			continue // forgetLeft and the gone mark decide
		}
		if prev != nil && !prev[e.ID] {
			d.setHave(e.ID, e.JoinSeq)
		} else if _, ok := d.joined[e.ID]; !ok {
			d.joined[e.ID] = e.LastSeq
		}
	}
}

// readded ends the gone mark of conv, whose user is a member again
// without a member.added, and tracks it again (rejoined).
func (d *dispatcher) readded(conv int64) {
	delete(d.gone, conv)
	delete(d.owed, conv)
	d.rejoined(conv)
}

// rejoined tracks conv again from where it was at the leave, which the
// catch-up found the user added back to while offline: what followed the
// new join (which no member.added brought live) is then caught up like
// any tracked conversation's. History skips what the user may not read
// (in a group whose history is "joined", the seqs of their absence); in
// one whose history is "all" it brings those too.
func (d *dispatcher) rejoined(conv int64) {
	if f, ok := d.left[conv]; ok && f >= 0 {
		delete(d.left, conv)
		d.setHave(conv, f)
	}
}

func inboxTargets(entries []InboxEntry) map[int64]int64 {
	t := make(map[int64]int64, len(entries))
	for _, e := range entries {
		t[e.ID] = e.LastSeq
	}
	return t
}

// inboxRetry reads the whole inbox, retrying while connected; false when
// the client closed or the connection went down (the next connection
// queues another catch-up).
func (d *dispatcher) inboxRetry() ([]InboxEntry, bool) {
	pause := newRetryPause(5 * time.Second)
	for {
		entries, err := d.inboxAll()
		if err == nil {
			return entries, true
		}
		if d.c.life.Err() != nil || !d.c.Connected() {
			return nil, false
		}
		d.c.cfg.Logger.Warn("catch-up: inbox failed; retrying", "err", err)
		if !pause.wait(d.c.life, err) {
			return nil, false
		}
	}
}

// addTargets records the inbox lastSeqs of tracked conversations that are
// ahead of their position.
func (d *dispatcher) addTargets(t map[int64]int64) {
	for conv, last := range t {
		if h, known := d.position(conv); known && last > h && last > d.targets[conv] {
			d.targets[conv] = last
		}
	}
}

// checkTargets fills the conversations that are behind their catch-up
// target. Without a server session it fills them all at once. On a
// persistent session it fills one conversation only when the server's
// replay is not bringing it: no progress on it for replayGrace, and the
// whole stream quiet for replayGrace too (or replayMaxWait passed since
// the reconnection). It fills at most one conversation per call and then
// queues another check behind the events that arrived meanwhile, so that
// their progress is seen first. Otherwise it schedules a check for when a
// conversation may become due.
func (d *dispatcher) checkTargets() {
	convs := slices.Sorted(maps.Keys(d.targets))
	var wait time.Duration
	for _, conv := range convs {
		target := d.targets[conv]
		if h, known := d.position(conv); !known || h >= target {
			delete(d.targets, conv)
			continue
		}
		if d.asks[conv] != nil {
			continue // its events wait for an answer; so does its fill (answered)
		}
		if d.c.cfg.persistent {
			now := time.Now()
			sinceSync := now.Sub(d.syncAt)
			own := now.Sub(laterOf(d.syncAt, d.seenAt[conv]))
			all := now.Sub(laterOf(d.syncAt, d.anySeen))
			due := time.Duration(0)
			if own < replayGrace {
				due = replayGrace - own
			}
			if all < replayGrace && sinceSync < replayMaxWait {
				due = max(due, min(replayGrace-all, replayMaxWait-sinceSync))
			}
			if due > 0 {
				if wait == 0 || due < wait {
					wait = due
				}
				continue
			}
		}
		err := d.fill(conv, target)
		if fillEnded(err) {
			return
		}
		if err != nil {
			d.c.cfg.Logger.Warn("catch-up: history refused", "conversation", conv, "err", err)
		}
		delete(d.targets, conv)
		if d.c.cfg.persistent && len(d.targets) > 0 {
			d.push(queued{check: true})
			return
		}
	}
	if len(d.targets) > 0 && wait > 0 {
		d.scheduleCheck(wait)
	}
}

func (d *dispatcher) scheduleCheck(after time.Duration) {
	if d.checkTimer != nil {
		d.checkTimer.Stop()
	}
	d.checkTimer = time.AfterFunc(after, func() { d.push(queued{check: true}) })
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// inboxAll reads the whole inbox: every conversation the user is a
// member of, each once, at its latest state read. Pages are cut by a
// keyset cursor, most recent activity first, and activity only moves a
// conversation up: one that gets a message while the pages are read
// moves ahead of those read and is on no later page (docs/http.md). So
// after the last page the read starts from the top again, until a page
// that lists a conversation unchanged since the first pass (same lastSeq)
// or ends the inbox: whatever moved after the first page was read is
// ahead of such a conversation, and one page is read at one instant, so
// when that is the round's first page it lists everything the pages
// missed. Reading the rest of a round is a pass of its own (more than a
// page of conversations moved), after which the top is read again. After
// inboxRounds of them the read fails, to be tried again (inboxRetry): a
// read that missed a conversation would have its position forgotten as
// one the user left, or take it for one joined while offline.
func (d *dispatcher) inboxAll() ([]InboxEntry, error) {
	var all []InboxEntry
	index := map[int64]int{}  // position in all, by conversation
	var first map[int64]int64 // lastSeq per conversation of the first pass
	for round := 0; round < inboxRounds; round++ {
		cursor := ""
		for pages := 1; ; pages++ {
			ctx, cancel := context.WithTimeout(d.c.life, d.c.cfg.RequestTimeout)
			page, err := d.c.Inbox(ctx, InboxOptions{Limit: inboxPage, Cursor: cursor})
			cancel()
			if err != nil {
				return nil, err
			}
			unmoved := false
			for _, e := range page.Conversations {
				if seq, ok := first[e.ID]; ok && seq == e.LastSeq {
					unmoved = true
				}
				if i, ok := index[e.ID]; ok {
					all[i] = e
					continue
				}
				index[e.ID] = len(all)
				all = append(all, e)
			}
			end := page.NextCursor == "" || len(page.Conversations) == 0
			if pages == 1 && (end || unmoved) {
				return all, nil
			}
			if end || unmoved {
				break
			}
			cursor = page.NextCursor
		}
		if first == nil {
			first = make(map[int64]int64, len(all))
			for _, e := range all {
				first[e.ID] = e.LastSeq
			}
		}
	}
	return nil, fmt.Errorf("read the inbox: more than a page of conversations moved in each of %d passes", inboxRounds)
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
	if h, ok := d.have[conv]; ok {
		d.left[conv] = max(h, d.left[conv])
	} else if h, ok := d.start[conv]; ok {
		d.left[conv] = max(h, d.left[conv])
	} else if _, ok := d.left[conv]; !ok {
		d.left[conv] = -1 // never tracked: gone (if set) still applies
	}
	delete(d.have, conv)
	delete(d.start, conv)
	d.posMu.Unlock()
	delete(d.targets, conv)
	delete(d.seenAt, conv)
}

// handOn hands ev, entry seq of conv, on and moves the conversation's
// position to it first: an application that persists Positions after
// processing an event finds the event in it. If the client closed
// first, the position goes back: Positions covers only what Events
// carried.
func (d *dispatcher) handOn(ev Event, conv, seq int64) bool {
	d.posMu.Lock()
	prev, had := d.have[conv]
	d.have[conv] = seq
	d.posMu.Unlock()
	if d.emit(ev) {
		return true
	}
	d.posMu.Lock()
	if had {
		d.have[conv] = prev
	} else {
		delete(d.have, conv)
	}
	d.posMu.Unlock()
	return false
}

// emit hands ev to the application, waiting for room; false when the
// client closed first and ev was not handed on.
func (d *dispatcher) emit(ev Event) bool {
	select {
	case d.out <- ev:
		d.c.stats.delivered.Add(1)
		if h := d.c.handedHook.Load(); h != nil {
			(*h)(ev)
		}
		return true
	case <-d.c.life.Done():
		return false
	}
}

// retryPause is a retry loop's wait between attempts: 200ms at first,
// doubling after each wait up to max.
type retryPause struct{ next, max time.Duration }

func newRetryPause(max time.Duration) retryPause {
	return retryPause{next: 200 * time.Millisecond, max: max}
}

// wait sleeps the pause, stretched to what a refusal err (nil: none) said
// (toldWait), unless ctx ends first (then it reports false), and doubles
// it for the next attempt.
func (p *retryPause) wait(ctx context.Context, err error) bool {
	if !sleepCtx(ctx, toldWait(p.next, toldBy(err))) {
		return false
	}
	p.next = min(2*p.next, p.max)
	return true
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
