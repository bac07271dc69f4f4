package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/internal/benchtarget"
)

var errHelp = errors.New("help")

type options struct {
	benchtarget.Target // -broker, -http, -data-dir, -jwt-secret

	plain       bool
	clients     int
	connectRate float64
	sources     []string
	metricsURL  string
	pprofURL    string
	serverPID   int
	pgPID       int
	stepTimeout time.Duration
	keepAlive   int
	userBase    int64
	workers     int
	profileDir  string
	gcs         int
	jsonOut     bool
	secret      []byte
}

func (o *options) target() string {
	if o.plain {
		return "plain"
	}
	return "chatd"
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	var sources string
	fs := flag.NewFlagSet("connbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.plain, "plain", false, "a plain MQTT broker (cmd/plainbroker): pairs subscribe to bench/pair/{n}; no chat semantics")
	fs.IntVar(&o.clients, "clients", 1000, "persistent sessions (an even number: pairs share a conversation)")
	fs.Float64Var(&o.connectRate, "connect-rate", 1000, "connections started per second (connect and resume)")
	fs.StringVar(&sources, "sources", "127.0.0.1", "source addresses to dial from, round robin: a list (127.0.0.2,127.0.0.3) or a range (127.0.0.2-127.0.0.9 or 127.0.0.2-9)")
	o.AddFlags(fs)
	fs.StringVar(&o.metricsURL, "metrics", "", "the server's Prometheus endpoint (default -http + /metrics; required with -plain); sent with CHAT_METRICS_TOKEN as a bearer token when set")
	fs.StringVar(&o.pprofURL, "pprof", "", "the server's pprof base URL (chatd's CHAT_PPROF_ADDR): heap?gc=1 collects garbage before each reading; without it the heap figures include garbage")
	fs.IntVar(&o.serverPID, "server-pid", 0, "the server's process id (RSS, open files)")
	fs.IntVar(&o.pgPID, "pg-pid", 0, "the PostgreSQL postmaster's process id: PSS of it and its backends")
	fs.DurationVar(&o.stepTimeout, "step-timeout", 2*time.Minute, "time allowed for each step")
	fs.IntVar(&o.keepAlive, "keepalive", 300, "MQTT keepalive in seconds")
	fs.Int64Var(&o.userBase, "user-base", 0, "first user id (default: from the clock, fresh users each run)")
	fs.IntVar(&o.workers, "setup-workers", 16, "parallel HTTP requests creating conversations")
	fs.IntVar(&o.gcs, "gcs", 4, "garbage collections forced before each reading: each halves the stack of a goroutine using under a quarter of it, as a running server's collections (at least one every two minutes) do over its first minutes")
	fs.StringVar(&o.profileDir, "profile-dir", "", "save the server's heap profile after each step here (needs -pprof)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: connbench [flags]\n\nMemory per idle and per offline persistent session, chatd or a plain broker (see go doc ./cmd/connbench).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.sources, err = parseSources(sources); err != nil {
		return nil, err
	}
	switch {
	case o.clients < 2 || o.clients%2 != 0:
		return nil, errors.New("-clients must be an even number, at least 2")
	case o.connectRate <= 0:
		return nil, errors.New("-connect-rate must be positive")
	case o.stepTimeout <= 0:
		return nil, errors.New("-step-timeout must be positive")
	case o.keepAlive < 1 || o.keepAlive > 65535:
		return nil, errors.New("-keepalive must be 1..65535")
	case o.plain && o.metricsURL == "":
		return nil, errors.New("-plain needs -metrics (plainbroker -metrics ADDR serves it)")
	case o.gcs < 1:
		return nil, errors.New("-gcs must be at least 1")
	case o.profileDir != "" && o.pprofURL == "":
		return nil, errors.New("-profile-dir needs -pprof")
	}
	if o.userBase == 0 {
		o.userBase = time.Now().Unix() * 100_000
	}
	o.Resolve()
	o.pprofURL = strings.TrimSuffix(o.pprofURL, "/")
	if o.metricsURL == "" {
		o.metricsURL = o.HTTPBase + "/metrics"
	}
	if !o.plain {
		if o.secret, err = o.Secret(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// parseSources reads "a,b,c" or "a.b.c.x-y" into IPv4 addresses.
func parseSources(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if lo, hi, ok := strings.Cut(part, "-"); ok {
			ip := net.ParseIP(lo).To4()
			if h := net.ParseIP(hi).To4(); h != nil {
				hi = strconv.Itoa(int(h[3]))
			}
			last, err := strconv.Atoi(hi)
			if ip == nil || err != nil || last < int(ip[3]) || last > 255 {
				return nil, fmt.Errorf("-sources: bad range %q (want 127.0.0.2-127.0.0.9)", part)
			}
			for i := int(ip[3]); i <= last; i++ {
				out = append(out, net.IPv4(ip[0], ip[1], ip[2], byte(i)).String())
			}
			continue
		}
		if net.ParseIP(part) == nil {
			return nil, fmt.Errorf("-sources: bad address %q", part)
		}
		out = append(out, part)
	}
	return out, nil
}
