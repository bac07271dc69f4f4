// Command plainbroker is mochi-mqtt with an allow-all auth hook and nothing
// else: no chat hooks, no database. chatbench -plain runs chatd's workload
// against it to measure the MQTT broker's own ceiling on the same machine.
// Its capabilities match chatd's broker (QoS 1 maximum, 256 receive
// maximum, the same write queue and buffer sizes), so the difference to
// chatd is the chat work: authentication, the PostgreSQL commit before each
// PUBACK, fan-out through the delivery hub.
//
//	go run ./cmd/plainbroker -addr 127.0.0.1:1884
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:1884", "MQTT TCP listen address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "plainbroker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string) error {
	srv, err := newBroker(addr)
	if err != nil {
		return err
	}
	if err := srv.Serve(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(os.Stderr, "plainbroker: listening on %s (no auth, no chat semantics)\n", addr)
	<-ctx.Done()
	return srv.Close()
}

// newBroker builds the server: chatd's capabilities, allow-all auth.
func newBroker(addr string) (*mqtt.Server, error) {
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumQos = 1
	caps.RetainAvailable = 0
	caps.SharedSubAvailable = 0
	caps.MaximumClientWritesPending = 8192
	caps.MaximumPacketSize = 64 * 1024
	caps.ReceiveMaximum = 256
	srv := mqtt.New(&mqtt.Options{
		Capabilities:             caps,
		Logger:                   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClientNetWriteBufferSize: 16 * 1024,
		ClientNetReadBufferSize:  16 * 1024,
	})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, fmt.Errorf("add auth hook: %w", err)
	}
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return srv, nil
}
