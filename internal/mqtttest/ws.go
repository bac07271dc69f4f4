package mqtttest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// DialWS opens a WebSocket to url (ws://host/mqtt) with subprotocol mqtt
// and returns it as a byte stream; origin may be empty.
func DialWS(url, origin string) (net.Conn, *http.Response, error) {
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := d.Dial(url, h)
	if err != nil {
		return nil, resp, err
	}
	return WrapWS(c), resp, nil
}

// WrapWS presents an established WebSocket (e.g. dialled with TLS) as a
// byte stream for DialConn.
func WrapWS(c *websocket.Conn) net.Conn { return &wsStream{Conn: c.NetConn(), c: c} }

type wsStream struct {
	net.Conn
	c  *websocket.Conn
	r  io.Reader
	mu sync.Mutex
}

func (w *wsStream) Read(p []byte) (int, error) {
	for {
		if w.r == nil {
			_, r, err := w.c.NextReader()
			if err != nil {
				return 0, err
			}
			w.r = r
		}
		n, err := w.r.Read(p)
		if errors.Is(err, io.EOF) {
			w.r = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (w *wsStream) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
