package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// remoteProfiles delivers the profile.updated events other nodes committed
// to this node's sessions of the users they are for, by the rule the
// committing node follows for its own (chat.ProfileAudience.Events: the
// users the profile's user blocked get it as Profile.SeenByBlocked). The
// events do not carry them (a profile's audience is who shares a
// conversation with its user, which is this node's to read, as presence's
// watchers are), so they are read from PostgreSQL, on a goroutine of
// their own: the Kafka
// consumer hands every node-to-node event over one at a time, and a
// lookup on its goroutine would hold up every other event behind it while
// the database is slow.
//
// A profile.updated carries the whole profile, so a newer one of a user
// replaces one still waiting: the queue holds at most one event per user,
// the users in the order their first waiting event arrived, and a user's
// profile is never delivered older after newer.
type remoteProfiles struct {
	store      *store.Store
	hub        interface{ Deliver(chat.Event) }
	largeGroup int
	log        *slog.Logger

	mu      sync.Mutex
	pending map[int64]chat.Event // by user
	order   []int64
	wake    chan struct{}
}

func newRemoteProfiles(st *store.Store, hub interface{ Deliver(chat.Event) }, largeGroup int, log *slog.Logger) *remoteProfiles {
	return &remoteProfiles{store: st, hub: hub, largeGroup: largeGroup, log: log,
		pending: map[int64]chat.Event{}, wake: make(chan struct{}, 1)}
}

// add queues ev for run; it never blocks.
func (p *remoteProfiles) add(ev chat.Event) {
	if ev.UserID <= 0 {
		return
	}
	p.mu.Lock()
	if _, waiting := p.pending[ev.UserID]; !waiting {
		p.order = append(p.order, ev.UserID)
	}
	p.pending[ev.UserID] = ev
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run delivers the queued events until ctx ends.
func (p *remoteProfiles) run(ctx context.Context) error {
	for {
		ev, ok := p.next()
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-p.wake:
			}
			continue
		}
		p.deliver(ctx, ev)
	}
}

func (p *remoteProfiles) next() (chat.Event, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.order) == 0 {
		return chat.Event{}, false
	}
	user := p.order[0]
	p.order = p.order[1:]
	ev := p.pending[user]
	delete(p.pending, user)
	return ev, true
}

func (p *remoteProfiles) deliver(ctx context.Context, ev chat.Event) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	aud, err := p.store.ProfileAudience(ctx, ev.UserID, p.largeGroup)
	if err != nil {
		p.log.Warn("profile.updated from another node not delivered: reading its audience failed", "user", ev.UserID, "err", err)
		return
	}
	for _, ev := range aud.Events(ev) {
		p.hub.Deliver(ev)
	}
}
