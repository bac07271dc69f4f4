package mqtttest

import (
	"log/slog"
	"os"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// PlainBroker runs a mochi broker without chatd's hooks (anyone may
// connect, publish and subscribe) on a loopback port until the test ends,
// and returns its address: what the load tools are measured against.
func PlainBroker(tb testing.TB) string {
	tb.Helper()
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		tb.Fatal(err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
	if err := srv.AddListener(tcp); err != nil {
		tb.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return tcp.Address()
}
