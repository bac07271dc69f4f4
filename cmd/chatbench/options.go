package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/chatd/chatd/internal/benchtarget"
)

const (
	modeSteady   = "steady"
	modeRamp     = "ramp"
	modeStorm    = "storm"
	modeReceipts = "receipts"
)

// options are chatbench's flags.
type options struct {
	benchtarget.Target // -broker, -http, -data-dir, -jwt-secret

	mode             string
	plain            bool
	clients          int
	direct           float64
	groupMin         int
	groupMax         int
	mqttVersion      int
	rate             float64
	inflight         int
	duration         time.Duration
	messages         int64
	bodyBytes        int
	edits, reactions float64
	drain            time.Duration
	persistent       bool
	userBase         int64
	seed             uint64
	workers          int
	jsonOut          bool
	verifyDB         string
	chatdPID         int
	pgPID            int
	metricsURL       string
	cpuProfile       string
	procs            int
	ackLog           string
	settle           time.Duration
	progress         string

	rampFactor float64
	rampStep   time.Duration
	rampMaxP99 time.Duration
	rampSteps  int

	conversations int
	secret        []byte
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("chatbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", modeSteady, "steady (target -rate), ramp (raise the rate until p99 PUBACK latency or errors degrade), storm (all clients drop and reconnect at once mid-run), receipts (every delivery answered by a read receipt)")
	fs.BoolVar(&o.plain, "plain", false, "run the same workload against a plain MQTT broker (cmd/plainbroker): publish to bench/conv/{id}, members subscribe to it; no chat semantics")
	o.AddFlags(fs)
	fs.IntVar(&o.clients, "clients", 200, "MQTT clients, one user each")
	fs.IntVar(&o.conversations, "conversations", 1000, "conversations to create among the clients' users")
	fs.Float64Var(&o.direct, "direct", 0.5, "fraction of direct conversations; the rest are groups")
	fs.IntVar(&o.groupMin, "group-min", 2, "smallest group (members, owner included)")
	fs.IntVar(&o.groupMax, "group-max", 50, "largest group")
	fs.IntVar(&o.mqttVersion, "mqtt-version", 5, "MQTT protocol version: 5 or 4 (3.1.1)")
	fs.Float64Var(&o.rate, "rate", 0, "target messages/s over all clients; 0 = as fast as PUBACKs allow with -inflight per client (ramp: the starting rate, default 500)")
	fs.IntVar(&o.inflight, "inflight", 4, "unacknowledged publishes per client")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "how long to send")
	fs.Int64Var(&o.messages, "messages", 0, "stop after this many messages (0: no limit)")
	fs.IntVar(&o.bodyBytes, "body-bytes", 100, "message body size")
	fs.Float64Var(&o.edits, "edits", 0, "fraction of publishes that edit the client's newest acknowledged message in the conversation (a message is sent instead while there is none)")
	fs.Float64Var(&o.reactions, "reactions", 0, "fraction of publishes that set or remove a reaction on the conversation's newest message the client received (a message while there is none)")
	fs.DurationVar(&o.settle, "settle", 3*time.Minute, "after connecting, wait at most this long for the setup's events (member.added, presence) to be delivered before measuring")
	fs.DurationVar(&o.drain, "drain", 15*time.Second, "after sending stops, how long to wait for outstanding deliveries")
	fs.BoolVar(&o.persistent, "persistent", true, "persistent sessions (v5 session expiry, v3.1.1 clean session 0), as mobile clients use")
	fs.Int64Var(&o.userBase, "user-base", 0, "first user id (default: derived from the clock, so each run has fresh users)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed for the conversation layout and traffic")
	fs.IntVar(&o.workers, "setup-workers", 16, "parallel HTTP requests during setup")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.verifyDB, "verify-db", "", "PostgreSQL URL of chatd's database: also check that every acked message is stored once and seqs are gapless")
	fs.IntVar(&o.chatdPID, "chatd-pid", 0, "chatd's process id: report its CPU and RSS (Linux /proc)")
	fs.IntVar(&o.pgPID, "pg-pid", 0, "the PostgreSQL postmaster's process id: report the CPU of it and all its backends, and their PSS (Linux /proc)")
	fs.StringVar(&o.metricsURL, "metrics", "", "chatd's Prometheus endpoint, scraped before and after to report its own view (default -http + /metrics; \"off\" to skip); sent with CHAT_METRICS_TOKEN as a bearer token when set")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write chatbench's own CPU profile to this file")
	fs.IntVar(&o.procs, "procs", 0, "run chatbench's goroutines on at most this many cores (GOMAXPROCS; 0: Go's default, one per core). 1 at a fixed -rate spares the server under test the load generator's thread wake-ups between cores; a maximum rate may need more")
	fs.StringVar(&o.ackLog, "ack-log", "", "write every acknowledged publish to this file, one a line: its send time (Unix seconds, microsecond precision) and its PUBACK latency in microseconds, to line slow PUBACKs up with the server's logs")
	fs.StringVar(&o.progress, "progress", "auto", "live progress line each second: auto (when stdout is a terminal), on, off")
	fs.Float64Var(&o.rampFactor, "ramp-factor", 1.5, "ramp: rate multiplier per step")
	fs.DurationVar(&o.rampStep, "ramp-step", 3*time.Second, "ramp: length of a step")
	fs.DurationVar(&o.rampMaxP99, "ramp-max-p99", 250*time.Millisecond, "ramp: a step whose p99 PUBACK latency exceeds this is not sustainable")
	fs.IntVar(&o.rampSteps, "ramp-steps", 12, "ramp: at most this many steps")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: chatbench [flags]\n\nLoad generator for chatd (or, with -plain, a plain MQTT broker). Examples:\n"+
			"  chatbench -clients 200 -conversations 1000 -duration 20s\n"+
			"  chatbench -mode ramp -rate 500 -json\n"+
			"  chatbench -plain -broker 127.0.0.1:1884\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []string
	switch o.mode {
	case modeSteady, modeRamp, modeStorm, modeReceipts:
	default:
		errs = append(errs, "-mode must be steady, ramp, storm or receipts")
	}
	if o.procs < 0 {
		errs = append(errs, "-procs must be 0 (Go's default) or more")
	}
	if o.edits < 0 || o.reactions < 0 || o.edits+o.reactions > 1 {
		return errors.New("-edits and -reactions are fractions that add up to at most 1")
	}
	if o.plain && o.edits+o.reactions > 0 {
		return errors.New("-edits and -reactions need chatd (a plain broker has no such thing)")
	}
	if o.plain && o.mode == modeReceipts {
		errs = append(errs, "-mode receipts needs chatd (read receipts are chat semantics), not -plain")
	}
	if o.clients < 2 {
		errs = append(errs, "-clients must be at least 2")
	}
	if o.conversations < 1 {
		errs = append(errs, "-conversations must be positive")
	}
	if o.direct < 0 || o.direct > 1 {
		errs = append(errs, "-direct must be between 0 and 1")
	}
	if o.groupMin < 2 || o.groupMax < o.groupMin {
		errs = append(errs, "-group-min must be at least 2 and -group-max at least -group-min")
	}
	if o.mqttVersion != 4 && o.mqttVersion != 5 {
		errs = append(errs, "-mqtt-version must be 4 or 5")
	}
	if o.rate < 0 || o.inflight < 1 || o.duration <= 0 || o.messages < 0 || o.bodyBytes < 1 {
		errs = append(errs, "-rate, -messages must be >= 0; -inflight, -duration, -body-bytes positive")
	}
	if o.mode == modeRamp && (o.rampFactor <= 1 || o.rampStep <= 0 || o.rampSteps < 1) {
		errs = append(errs, "-ramp-factor must be > 1, -ramp-step and -ramp-steps positive")
	}
	switch o.progress {
	case "auto", "on", "off":
	default:
		errs = append(errs, "-progress must be auto, on or off")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	if o.userBase == 0 {
		// Fresh users per run: runs a second apart get disjoint ranges of
		// 100,000 ids.
		o.userBase = time.Now().Unix() * 100_000
	}
	o.Resolve()
	if o.metricsURL == "" && !o.plain {
		o.metricsURL = o.HTTPBase + "/metrics"
	}
	if o.metricsURL == "off" {
		o.metricsURL = ""
	}
	return nil
}

// loadSecret resolves the JWT secret (none for a plain broker).
func (o *options) loadSecret() (err error) {
	if !o.plain {
		o.secret, err = o.Secret()
	}
	return err
}
