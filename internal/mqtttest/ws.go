package mqtttest

import (
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chatd/chatd/internal/wsstream"
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
func WrapWS(c *websocket.Conn) net.Conn { return wsstream.New(c) }
