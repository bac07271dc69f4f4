// Package wsstream presents a WebSocket that carries MQTT as the byte
// stream MQTT packets are read from and written to. chatd's WebSocket
// listener (package broker) and the tests' raw client (internal/mqtttest)
// both speak MQTT over it.
package wsstream

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/gorilla/websocket"
)

// ErrNotBinary: MQTT over WebSocket uses binary messages only.
var ErrNotBinary = errors.New("websocket: MQTT needs binary messages")

// Conn is a WebSocket as a net.Conn: reads run on through its messages as
// one stream (a packet may span messages, a message hold several), each
// write is one binary message. Deadlines and Close act on the underlying
// connection. One goroutine reads; writes are safe for concurrent use.
type Conn struct {
	net.Conn
	c  *websocket.Conn
	r  io.Reader // the message being read
	mu sync.Mutex
}

// New wraps an established WebSocket.
func New(c *websocket.Conn) *Conn { return &Conn{Conn: c.NetConn(), c: c} }

// NetConn returns the connection the WebSocket runs on, as
// websocket.Conn.NetConn does.
func (s *Conn) NetConn() net.Conn { return s.Conn }

func (s *Conn) Read(p []byte) (int, error) {
	for {
		if s.r == nil {
			op, r, err := s.c.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, ErrNotBinary
			}
			s.r = r
		}
		n, err := s.r.Read(p)
		if errors.Is(err, io.EOF) {
			s.r = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (s *Conn) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
