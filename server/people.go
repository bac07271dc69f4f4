package server

import (
	"context"
	"time"

	chat "github.com/chatd/chatd"
)

// remoteProfile delivers a profile.updated another node committed to this
// node's sessions of the users it is for. The event does not carry them
// (a profile's audience is who shares a conversation with its user, which
// is this node's to read, as presence's watchers are), so they are read
// here, off the fan-out goroutine.
func (s *Server) remoteProfile(ev chat.Event) {
	if ev.UserID <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	to, err := s.store.ProfileWatchers(ctx, ev.UserID, s.largeGroup)
	if err != nil {
		s.log.Warn("profile.updated from another node not delivered: reading its audience failed", "user", ev.UserID, "err", err)
		return
	}
	ev.To = to
	s.Hub.Deliver(ev)
}
