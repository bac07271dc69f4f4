package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one bench and returns the exit status: 0 when every check
// passed, 1 when the run failed a check (the report says which) or could
// not run, 2 for bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "chatbench:", err)
		return 2
	}
	showProgress := o.progress == "on"
	if o.progress == "auto" && !o.jsonOut {
		if f, ok := stdout.(*os.File); ok && isTerminal(f) {
			showProgress = true
		}
	}
	if o.procs > 0 {
		runtime.GOMAXPROCS(o.procs)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "chatbench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "chatbench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := execute(ctx, o, stdout, stderr, showProgress)
	if err != nil {
		fmt.Fprintln(stderr, "chatbench:", err)
		return 1
	}
	if o.jsonOut {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "chatbench:", err)
		return 1
	}
	if !rep.OK {
		return 1
	}
	return 0
}

// execute sets up the world, runs the mode and builds the report.
func execute(ctx context.Context, o *options, stdout, stderr io.Writer, showProgress bool) (*Report, error) {
	if err := o.loadSecret(); err != nil {
		return nil, err
	}
	setupStart := time.Now()
	w := plan(o)
	if o.plain {
		w.synthesize()
	} else {
		if err := w.mintTokens(o.secret, o.duration+time.Hour); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "chatbench: creating %d conversations for %d users through %s ...\n", len(w.convs), len(w.users), o.HTTPBase)
		if err := w.createConversations(ctx, &o.Target, o.workers); err != nil {
			return nil, err
		}
	}
	t := newTracker()
	b := &bench{o: o, w: w, t: t}
	b.newClients()
	fmt.Fprintf(stderr, "chatbench: connecting %d MQTT clients to %s ...\n", len(b.clients), o.Broker)
	if err := b.connectAll(ctx, 50, true); err != nil {
		b.closeAll()
		return nil, fmt.Errorf("connect: %w (is the broker at %s? set -broker)%s", err, o.Broker, limitHint(err.Error()))
	}
	fmt.Fprintf(stderr, "chatbench: waiting for the setup's events to be delivered ...\n")
	settleStart := time.Now()
	settled := b.settle(ctx, o.settle)
	settleSeconds := time.Since(settleStart).Seconds()
	setupEvents := b.eventTypes()
	if !settled {
		fmt.Fprintf(stderr, "chatbench: setup events still arriving after %v; measuring anyway\n", o.settle)
	}
	setupSeconds := time.Since(setupStart).Seconds()

	var sampler, pgSampler *procSampler
	if o.chatdPID > 0 {
		var err error
		if sampler, err = startProcSampler(o.chatdPID, false); err != nil {
			b.closeAll()
			return nil, fmt.Errorf("-chatd-pid: %w", err)
		}
	}
	if o.pgPID > 0 {
		var err error
		if pgSampler, err = startProcSampler(o.pgPID, true); err != nil {
			b.closeAll()
			return nil, fmt.Errorf("-pg-pid: %w", err)
		}
	}

	sendFor := o.duration
	if o.mode == modeRamp {
		sendFor = time.Duration(o.rampSteps)*(o.rampStep+time.Second) + time.Second
	}
	sendCtx, cancelSend := context.WithTimeout(ctx, sendFor)
	defer cancelSend()
	b.setRate(o.rate)
	if o.messages > 0 {
		b.limited = true
		b.budget.Store(o.messages)
	}
	var metricsBefore map[string]float64
	if o.metricsURL != "" {
		var err error
		if metricsBefore, err = scrapeMetrics(ctx, o.metricsURL); err != nil {
			fmt.Fprintf(stderr, "chatbench: no server metrics (%v); pass -metrics off to skip\n", err)
		}
	}
	b.sendStart = t.now()
	cpu := startCPUWindow()
	fmt.Fprintf(stderr, "chatbench: %s load for %v ...\n", o.mode, sendFor.Round(time.Second))

	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if showProgress {
		progressDone.Add(1)
		go func() { defer progressDone.Done(); b.progress(stdout, stopProgress) }()
	}
	var senders sync.WaitGroup
	for _, c := range b.clients {
		senders.Add(1)
		go func() { defer senders.Done(); c.sendLoop(sendCtx) }()
	}
	var (
		rampRes  *RampResult
		stormRes *StormResult
		ctrl     sync.WaitGroup
	)
	switch o.mode {
	case modeRamp:
		ctrl.Add(1)
		go func() { defer ctrl.Done(); rampRes = b.ramp(sendCtx); cancelSend() }()
	case modeStorm:
		ctrl.Add(1)
		go func() { defer ctrl.Done(); stormRes = b.storm(sendCtx) }()
	}
	senders.Wait()
	ctrl.Wait()
	sendEnd := t.now()
	b.waitAcks(30 * time.Second)
	drainStart := time.Now()
	drained := b.waitDelivered(ctx, o.drain)
	drainSeconds := time.Since(drainStart).Seconds()
	b.closing.Store(true) // no new read receipts; let those in flight settle
	b.waitReads(10 * time.Second)
	close(stopProgress)
	progressDone.Wait()
	busy, self, selfSeconds := cpu.finish()
	var serverMetrics *ServerMetrics
	if metricsBefore != nil {
		if after, err := scrapeMetrics(ctx, o.metricsURL); err == nil {
			serverMetrics = metricDeltas(metricsBefore, after)
		}
	}
	var proc, pg *ProcStats
	if sampler != nil {
		proc = sampler.finish()
	}
	if pgSampler != nil {
		pg = pgSampler.finish()
	}
	b.closeAll()
	for _, c := range b.clients {
		t.merge(c.samples)
	}
	rep := b.report(setupSeconds, (sendEnd - b.sendStart).Seconds())
	rep.Chatd, rep.Postgres = proc, pg
	rep.CPUPerMessage = cpuPerMessage(rep.Acked, proc, pg, selfSeconds)
	rep.DrainSeconds, rep.Drained = drainSeconds, drained
	rep.Machine.BusyPercent, rep.Machine.ChatbenchPercent = busy, self
	rep.ServerMetrics = serverMetrics
	rep.Events = b.eventTypes()
	for k, v := range setupEvents {
		if rep.Events[k] -= v; rep.Events[k] == 0 {
			delete(rep.Events, k)
		}
	}
	rep.Setup = SetupInfo{Seconds: setupSeconds, SettleSeconds: settleSeconds, Settled: settled, Events: setupEvents}
	rep.Ramp = rampRes
	rep.Storm = stormRes
	if o.mode == modeReceipts {
		rep.Receipts = b.receipts((time.Duration(t.lastDelivery.Load()) - b.sendStart).Seconds())
	}
	if o.ackLog != "" {
		if err := t.writeAckLog(o.ackLog); err != nil {
			return nil, err
		}
	}
	if o.verifyDB != "" && !o.plain {
		chk, err := verifyDB(ctx, o.verifyDB, b.convIDs(), b.ackedIDs())
		if err != nil {
			return nil, err
		}
		rep.Database = chk
	}
	rep.OK = rep.Lost == 0 && rep.Gaps == 0 && rep.Refused == 0 && rep.Acked > 0 &&
		(o.mode == modeStorm || rep.Unacked == 0) &&
		(rep.Database == nil || (rep.Database.Gapless && rep.Database.MissingAcked == 0 && rep.Database.Duplicated == 0)) &&
		(rep.Storm == nil || rep.Storm.CaughtUp)
	return rep, nil
}

func (b *bench) closeAll() {
	var wg sync.WaitGroup
	for _, c := range b.clients {
		wg.Add(1)
		go func() { defer wg.Done(); c.close() }()
	}
	wg.Wait()
}

// report builds the report from the books.
func (b *bench) report(setupSeconds, sendSeconds float64) *Report {
	o, t := b.o, b.t
	direct, groups, avg := b.w.stats()
	target := "chatd"
	if o.plain {
		target = "plain"
	}
	lost, examples := t.losses()
	var ackAll []int64
	for _, v := range t.ackLat {
		ackAll = append(ackAll, v...)
	}
	r := &Report{
		Target: target, Mode: o.mode, Broker: o.Broker, MQTTVersion: o.mqttVersion,
		Clients: len(b.clients), Conversations: len(b.w.convs), Direct: direct, Groups: groups, AvgMembers: avg,
		BodyBytes: o.bodyBytes, Inflight: o.inflight, TargetRate: o.rate, Persistent: o.persistent,
		SetupSeconds: setupSeconds, SendSeconds: sendSeconds,
		Sent: t.sent.Load(), Acked: t.acked.Load(), Refused: t.refused.Load(), Unacked: t.unacked.Load(), Retried: t.retried.Load(),
		Expected: t.owed.Load(), Delivered: t.delivered.Load(), DeliveredUnacked: t.deliveredUnacked.Load(),
		Duplicates: t.duplicates.Load(), Gaps: t.gaps.Load(), GapMessages: t.gapMessages.Load(),
		Lost: lost, Unknown: t.unknown.Load() + t.unclaimed(), LossExamples: examples, Errors: t.errCodes, Retries: t.retries,
		AckedByKind: map[string]int64{"message": t.kinds[kindMessage].Load(), "edit": t.kinds[kindEdit].Load(), "reaction": t.kinds[kindReaction].Load()},
		AckLatency:  latency(ackAll), DeliveryLatency: latency(t.delivLat), Machine: machine(),
	}
	if d := time.Duration(t.lastAck.Load()) - b.sendStart; d > 0 {
		r.AckedPerSec = float64(r.Acked) / d.Seconds()
	}
	if d := time.Duration(t.lastDelivery.Load()) - b.sendStart; d > 0 {
		r.DeliveriesPerSec = float64(r.Delivered) / d.Seconds()
	}
	return r
}

func (b *bench) convIDs() []int64 {
	ids := make([]int64, 0, len(b.w.convs))
	for _, c := range b.w.convs {
		ids = append(ids, c.id)
	}
	return ids
}

func (b *bench) ackedIDs() []string {
	var ids []string
	b.t.byID.Range(func(id string, r *msgRec) bool {
		r.mu.Lock()
		ok := r.acked && !r.refused
		r.mu.Unlock()
		if ok {
			ids = append(ids, id)
		}
		return true
	})
	return ids
}

// limitHint explains refusals caused by chatd's rate limits, which a
// benchmark from one machine trips at once.
func limitHint(msg string) string {
	if strings.Contains(msg, "0x9f") || strings.Contains(msg, "0x97") || strings.Contains(msg, "rate_limited") {
		return "; chatd limits rates per user and per IP: for benchmarks run it with " + benchEnv
	}
	return ""
}

// benchEnv turns off chatd's rate limits.
const benchEnv = "CHAT_LIMIT_SEND_RATE=0 CHAT_LIMIT_CONV_RATE=0 CHAT_LIMIT_READ_RATE=0 CHAT_LIMIT_API_RATE=0 CHAT_LIMIT_CONNECT_RATE=0 CHAT_LIMIT_CONNECT_USER_RATE=0 CHAT_MAX_CONNECTIONS_PER_USER=0 CHAT_CONNECT_BUDGET_RATE=0 CHAT_MAX_PENDING_CONNECTS_PER_IP=0 CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP=0"
