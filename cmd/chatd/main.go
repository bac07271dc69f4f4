// Command chatd is the chat server: MQTT (TCP and WebSocket) and HTTP on
// PostgreSQL, embedded by default. See README.md and configs/chatd.yaml.
//
// Signals: SIGINT and SIGTERM shut down gracefully; SIGHUP re-reads the
// TLS certificate and key (tls_cert, tls_key), the client CAs
// (mqtts_client_ca) and the client CRL (mqtts_client_crl) without dropping
// connections, but those of the device certificates whose CA was removed
// or that the new CRL revokes.
//
// chatd starts goroutines with the runtime's smallest stack
// (GODEBUG=adaptivestackstart=0, set by re-executing itself when the
// environment does not set it): see stacks.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/buildinfo"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/tracing"
	"github.com/chatd/chatd/server"
)

func main() {
	reexecWithSmallStacks()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}

// run is chatd until ctx ends (SIGINT, SIGTERM): exit status 0 after a
// clean shutdown (also one requested while starting) or -help/-version, 1
// when it fails, 2 for bad settings (also those found while starting: an
// unusable database URL).
// environ is the whole environment, "KEY=value" (os.Environ).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	// flushBy bounds the tracing flush at exit: the stop's own bound once
	// a stop began (zero before: a failed start).
	var flushBy time.Time
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[k]; !dup { // the first wins, as with os.Getenv
				env[k] = v
			}
		}
	}
	getenv := func(k string) string { return env[k] }
	st, err := config.Load(args, config.MapEnv(env))
	switch {
	case errors.Is(err, flag.ErrHelp):
		config.PrintUsage(stdout)
		return 0
	case errors.Is(err, config.ErrVersion):
		fmt.Fprintln(stdout, "chatd", buildinfo.Get())
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "chatd:", err)
		return 2
	}
	log := newLogger(st, stderr)
	slog.SetDefault(log)
	for _, u := range config.UnknownEnv(environ) {
		if u.DidYouMean != "" {
			log.Warn("unknown environment variable ignored", "var", u.Name, "did_you_mean", u.DidYouMean)
		} else {
			log.Warn("unknown environment variable ignored", "var", u.Name)
		}
	}
	// The OpenTelemetry SDK says what it cannot use (an exporter variable
	// that does not parse, say) through a global logger of its own, which
	// writes bare lines to the process's stderr: into chatd's log instead.
	otel.SetLogger(logr.FromSlogHandler(log.With("component", "tracing").Handler()))
	tp, tc, err := tracing.FromEnv(ctx, getenv, tracing.Identity{Version: buildinfo.Get().Version, Instance: st.NodeID})
	if err != nil {
		fmt.Fprintln(stderr, "chatd:", err)
		return 2
	}
	var opts []server.Option
	if tp != nil {
		// Export failures (a collector down) are the SDK's to retry;
		// they belong in chatd's log, not on a bare stderr line.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: export failed", "err", err) }))
		// After the node stopped: its last spans are flushed, not lost,
		// within the stop's bound (flushBy, set when the stop begins).
		defer func() { shutdownTracing(tp, log, flushBy) }()
		opts = append(opts, server.WithTracerProvider(tp))
		log.Info("tracing on", "exporter", "otlp", "protocol", tc.Protocol, "endpoint", tc.Endpoint,
			"sampler", tc.Sampler, "sampler_arg", tc.SamplerArg, "service", tc.ServiceName)
	}
	if st.Dev {
		log.Warn("DEVELOPMENT MODE: anyone can mint a token for any user through the dev sign-in; never run --dev on a reachable address")
	}
	if addr := getenv("CHAT_PPROF_ADDR"); addr != "" {
		// Profiling for operators (go tool pprof http://ADDR/debug/pprof/profile);
		// its own listener, never on the public HTTP address. Listened on
		// before the start: a node the operator asked to profile does not
		// run without it.
		if _, _, err := net.SplitHostPort(addr); err != nil {
			fmt.Fprintf(stderr, "chatd: CHAT_PPROF_ADDR %q: %v\n", addr, err)
			return 2
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintf(stderr, "chatd: CHAT_PPROF_ADDR: %v\n", err)
			return 1
		}
		defer ln.Close()
		log.Warn("pprof listening", "addr", ln.Addr().String())
		go func() {
			if err := http.Serve(ln, nil); err != nil && !errors.Is(err, net.ErrClosed) {
				log.Error("pprof listener stopped", "err", err)
			}
		}()
	}
	// Before Start, so a SIGHUP right after "chatd ready" is not fatal.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv, err := server.Start(ctx, st, log, opts...)
	if err != nil && ctx.Err() != nil {
		// SIGTERM or Ctrl-C before the start finished: a requested stop.
		log.Info("chatd stopped while starting", "err", err)
		return 0
	}
	if err != nil {
		log.Error("chatd failed to start", "err", err)
		// A setting found unusable only now (the database URL) is as
		// bad as one Load refused: a restart cannot fix it.
		var bad *config.Error
		if errors.As(err, &bad) {
			return 2
		}
		return 1
	}
	dbFailed := false
	for ctx.Err() == nil && !dbFailed {
		select {
		case <-ctx.Done():
		case <-srv.DatabaseExited():
			// A supervisor (systemd Restart=always, a container runtime)
			// starts chatd again, and with it PostgreSQL's crash recovery.
			log.Error("the embedded PostgreSQL exited; chatd cannot serve without it and stops", "postgres_log", filepath.Join(pgembed.PGDir(st.DataDir), "postgres.log"))
			dbFailed = true
		case <-hup:
			// Let's Encrypt renewals: certbot --deploy-hook "systemctl reload chatd".
			if err := srv.ReloadTLS(); err != nil {
				log.Error("SIGHUP: TLS certificate, client CAs or client CRL not reloaded; the previous one stays in use", "err", err)
			}
		}
	}
	// A second Ctrl-C during the graceful shutdown stops at once.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	log.Info("shutting down", "budget", st.ShutdownTimeout)
	// The node stops within its budget and the cleanup grace after it
	// (plus an embedded PostgreSQL's immediate shutdown): the spans' flush
	// keeps to that bound rather than adding to it.
	flushBy = time.Now().Add(st.ShutdownTimeout + server.CleanupGrace)
	sctx, cancel := context.WithTimeout(context.Background(), st.ShutdownTimeout)
	defer cancel()
	if err := srv.Close(sctx); err != nil {
		log.Error("shutdown incomplete", "err", err)
		return 1
	}
	if dbFailed {
		log.Info("chatd stopped: its embedded PostgreSQL had exited")
		return 1
	}
	log.Info("chatd stopped")
	return 0
}

// tracingFlushMax bounds the flush of the spans at exit by itself.
const tracingFlushMax = 5 * time.Second

// shutdownTracing flushes the spans still queued, by deadline (the stop's
// bound; zero: none) and within tracingFlushMax: a collector that does
// not answer must not hold up the exit, nor take a stop past its bound
// (deploy/chatd.service's TimeoutStopSec is that bound and no more).
func shutdownTracing(tp *sdktrace.TracerProvider, log *slog.Logger, deadline time.Time) {
	if d := time.Now().Add(tracingFlushMax); deadline.IsZero() || d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not flushed at exit", "err", err)
	}
}

func newLogger(st config.Settings, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: st.SlogLevel()}
	if st.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
