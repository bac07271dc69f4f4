package delivery

import chat "github.com/chatd/chatd"

// Queued is the number of items waiting in the session's mailbox.
func (s *Session) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.box)
}

// StopRequested reports whether the session was told to stop.
func (s *Session) StopRequested() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flags&flagStop != 0
}

// Reply queues acks on this session, as Hub.Reply does once it found it:
// the session may have stopped since.
func (s *Session) Reply(acks []chat.Ack) { s.reply(acks) }

// Pumping reports whether the session's pump runs (or is about to).
func (s *Session) Pumping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// HoldFanout blocks the fan-out at the next event it routes to sessions
// until release is called (it takes the lock routing reads).
func (h *Hub) HoldFanout() (release func()) {
	h.mu.Lock()
	return h.mu.Unlock
}
