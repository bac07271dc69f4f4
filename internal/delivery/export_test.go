package delivery

// Queued is the number of items waiting in the session's mailbox.
func (s *Session) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.box)
}
