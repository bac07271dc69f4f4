// Command chatd is the chat server: MQTT (TCP and WebSocket) and HTTP on
// PostgreSQL, embedded by default. See README.md and configs/chatd.yaml.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/server"
)

func main() {
	os.Exit(run())
}

func run() int {
	st, err := config.Load(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chatd:", err)
		return 2
	}
	log := newLogger(st)
	slog.SetDefault(log)
	if st.Dev {
		log.Warn("DEVELOPMENT MODE: anyone can mint a token for any user through the dev sign-in; never run --dev on a reachable address")
	}
	if addr := os.Getenv("CHAT_PPROF_ADDR"); addr != "" {
		// Profiling for operators (go tool pprof http://ADDR/debug/pprof/profile);
		// its own listener, never on the public HTTP address.
		go func() {
			log.Warn("pprof listening", "addr", addr)
			if err := http.ListenAndServe(addr, nil); err != nil {
				log.Error("pprof listener stopped", "err", err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, st, log)
	if err != nil {
		log.Error("chatd failed to start", "err", err)
		return 1
	}
	<-ctx.Done()
	stop()
	log.Info("shutting down", "budget", st.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), st.ShutdownTimeout)
	defer cancel()
	if err := srv.Close(sctx); err != nil {
		log.Error("shutdown incomplete", "err", err)
		return 1
	}
	log.Info("chatd stopped")
	return 0
}

func newLogger(st config.Settings) *slog.Logger {
	opts := &slog.HandlerOptions{Level: st.SlogLevel()}
	if st.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
