package benchmqtt

import "sync"

// Slot holds a simulated client's current connection, which a reconnect
// replaces and a drop or disconnect takes away, while its publishers read
// it from other goroutines. The zero Slot is empty and ready to use.
type Slot struct {
	mu   sync.Mutex
	conn *Conn
}

// Set makes c the current connection.
func (s *Slot) Set(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = c
}

// Current is the current connection, nil when there is none.
func (s *Slot) Current() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// Take empties the slot and returns what it held (nil if nothing).
func (s *Slot) Take() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conn
	s.conn = nil
	return c
}
