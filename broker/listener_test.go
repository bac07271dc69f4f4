package broker

import (
	"log/slog"
	"testing"

	"github.com/mochi-mqtt/server/v2/listeners"
)

// closer is the part of listeners.Listener that Shutdown relies on.
type closer interface {
	Init(*slog.Logger) error
	Close(listeners.CloseFn)
}

// mochi's Server.Close closes every listener again after Broker.Shutdown
// has closed them and disconnected the clients; its closeListenerClients
// can deadlock against disconnecting clients, so a second Close must not
// call it.
func TestListenerClosesItsClientsOnlyOnTheFirstClose(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for name, l := range map[string]closer{
		"tcp":       NewTCPListener("t", "127.0.0.1:0", nil, log),
		"websocket": NewWSListener("w", nil, log),
	} {
		if err := l.Init(log); err != nil {
			t.Fatalf("%s: init: %v", name, err)
		}
		calls := 0
		count := func(string) { calls++ }
		l.Close(count)
		l.Close(count)
		l.Close(count)
		if calls != 1 {
			t.Fatalf("%s: closeClients called %d times, want once", name, calls)
		}
	}
}

func TestClosedTCPListenerDoesNotBindAgain(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	l := NewTCPListener("t", "127.0.0.1:0", nil, log)
	l.Close(func(string) {})
	if err := l.Init(log); err == nil {
		t.Fatal("Init after Close bound a socket")
	}
}
