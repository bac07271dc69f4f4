// Command plainbroker is mochi-mqtt with an allow-all auth hook and nothing
// else: no chat hooks, no database. chatbench -plain and connbench -plain
// run chatd's workloads against it to measure the MQTT broker's own cost
// on the same machine. It runs with chatd's mochi options
// (broker.ServerOptions: QoS 1 maximum, 256 receive maximum, the same
// buffer sizes) but for the outbound queue: mochi routes every publish
// through that queue and drops what does not fit, while chatd routes
// nothing through it, so plainbroker keeps mochi's 8,192 slots. The
// difference to chatd is the chat work: authentication, the PostgreSQL
// commit before each PUBACK, fan-out through the delivery hub.
//
//	go run ./cmd/plainbroker -addr 127.0.0.1:1884 -metrics 127.0.0.1:9884
//
// -metrics serves /metrics (Go runtime and process collectors) and
// /debug/pprof/ (heap?gc=1 forces a collection first), as chatd's
// CHAT_METRICS_ADDR and CHAT_PPROF_ADDR do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/broker"
)

// writesPending is mochi's default outbound queue: its routing needs it.
const writesPending = 8192

func main() {
	addr := flag.String("addr", "127.0.0.1:1884", "MQTT TCP listen address")
	metrics := flag.String("metrics", "", "serve /metrics and /debug/pprof/ on this address (off when empty)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *metrics); err != nil {
		fmt.Fprintln(os.Stderr, "plainbroker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, metricsAddr string) error {
	srv, err := newBroker(addr)
	if err != nil {
		return err
	}
	if metricsAddr != "" {
		prometheus.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "plainbroker_clients_connected", Help: "Connected MQTT clients.",
		}, func() float64 { return float64(atomic.LoadInt64(&srv.Info.ClientsConnected)) }))
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", metricsAddr, err)
		}
		hs := &http.Server{Handler: metricsMux(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "plainbroker: metrics:", err)
			}
		}()
		defer hs.Close()
	}
	if err := srv.Serve(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(os.Stderr, "plainbroker: listening on %s (no auth, no chat semantics)\n", addr)
	<-ctx.Done()
	return srv.Close()
}

func metricsMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// newBroker builds the server: chatd's options, allow-all auth.
func newBroker(addr string) (*mqtt.Server, error) {
	opts := broker.ServerOptions(chat.DefaultLimits())
	opts.Capabilities.MaximumClientWritesPending = writesPending
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := mqtt.New(opts)
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, fmt.Errorf("add auth hook: %w", err)
	}
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return srv, nil
}
