package delivery

import "slices"

// waitList holds a session's events of conversations that wait for the
// session's word that they are the user's (Session.later), oldest first,
// and how many of each conversation wait. It keeps at most a bound of
// them (QueueSize), and past it one conversation never crowds out
// another: an event is dropped when its conversation has the most
// waiting (or as many as any), and otherwise the event that has waited
// longest of the conversations that have the most is dropped to make
// room for it. A conversation whose events wait for good (the user was
// removed on another node and the relay is down: their stream never gets
// the entries they wait for) thus takes the room only while nothing else
// needs it, and of two that have as many, it is the one whose events
// came first that gives way: not one of a conversation whose entries are
// on their way. A pure value: the session's pump owns it.
type waitList struct {
	evs []laterEvent
	per map[int64]int // events waiting, by conversation
}

// len is how many events wait.
func (l *waitList) len() int { return len(l.evs) }

// has reports whether an event of conv waits.
func (l *waitList) has(conv int64) bool { return l.per[conv] > 0 }

// room reports whether add keeps an event of conv while at most limit
// wait.
func (l *waitList) room(conv int64, limit int) bool {
	if len(l.evs) < limit {
		return true
	}
	return l.per[conv] < l.most()
}

// most is how many events the conversation with the most waiting has.
func (l *waitList) most() (n int) {
	for _, k := range l.per {
		n = max(n, k)
	}
	return n
}

// add appends w, which room allowed: at limit, of the conversations with
// the most waiting, the event that has waited longest goes (the first
// found: not by map order, which would pick at random among as many).
func (l *waitList) add(w laterEvent, limit int) {
	if len(l.evs) >= limit {
		most := l.most()
		for i, o := range l.evs {
			if l.per[o.it.conv] == most {
				l.evs = slices.Delete(l.evs, i, i+1)
				l.count(o.it.conv, -1)
				break
			}
		}
	}
	l.evs = append(l.evs, w)
	l.count(w.it.conv, 1)
}

func (l *waitList) count(conv int64, d int) {
	if l.per == nil {
		l.per = map[int64]int{}
	}
	if l.per[conv] += d; l.per[conv] <= 0 {
		delete(l.per, conv)
	}
}

// filter keeps, in order, the events keep returns true for; keep may
// change the event it is given.
func (l *waitList) filter(keep func(w *laterEvent) bool) {
	rest := l.evs[:0]
	for _, w := range l.evs {
		if keep(&w) {
			rest = append(rest, w)
		} else {
			l.count(w.it.conv, -1)
		}
	}
	clear(l.evs[len(rest):])
	l.evs = rest
}
