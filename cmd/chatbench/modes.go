package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/retry"
)

// RampResult is the outcome of -mode ramp.
type RampResult struct {
	Steps          []RampStep `json:"steps"`
	MaxSustainable float64    `json:"maxSustainableAckedPerSec"`
	StoppedBecause string     `json:"stoppedBecause"`
}

// RampStep is one rate of the ramp.
type RampStep struct {
	TargetRate  float64 `json:"targetRate"`
	AckedPerSec float64 `json:"ackedPerSec"`
	AckP99      float64 `json:"ackP99Ms"`
	Errors      int64   `json:"errors"`
	Verdict     string  `json:"verdict"`
}

// StormResult is the outcome of -mode storm.
type StormResult struct {
	Clients          int     `json:"clients"`
	AtSeconds        float64 `json:"atSeconds"`
	PendingAtStorm   int64   `json:"pendingAtStorm"` // deliveries owed when the clients dropped
	ReconnectSeconds float64 `json:"reconnectSeconds"`
	CatchUpSeconds   float64 `json:"catchUpSeconds"`
	CaughtUp         bool    `json:"caughtUp"`
	ReconnectErrors  int64   `json:"reconnectErrors"`
}

// ReceiptsResult is the outcome of -mode receipts.
type ReceiptsResult struct {
	Sent        int64   `json:"sent"`
	Acked       int64   `json:"acked"`
	Failed      int64   `json:"failed"`
	ReadUpdated int64   `json:"readUpdatedReceived"`
	PerSec      float64 `json:"perSec"`
	AckLatency  Latency `json:"ackLatencyMs"`
}

// ramp raises the rate step by step until a step is not sustainable: its
// p99 PUBACK latency is over -ramp-max-p99, a publish failed, or fewer
// than 90% of the target were acknowledged.
func (b *bench) ramp(ctx context.Context) *RampResult {
	o := b.o
	res := &RampResult{StoppedBecause: "all steps passed"}
	r := o.rate
	if r <= 0 {
		r = 500
	}
	for i := range o.rampSteps {
		b.phase.Store(int32(i))
		b.setRate(r)
		acked0, errs0 := b.t.acked.Load(), b.t.refused.Load()+b.t.unacked.Load()
		start := time.Now()
		if !retry.Sleep(ctx, o.rampStep) {
			res.StoppedBecause = "interrupted"
			break
		}
		elapsed := time.Since(start).Seconds()
		// Let this step's stragglers be acknowledged before judging it.
		b.waitAcks(time.Second)
		step := RampStep{
			TargetRate:  r,
			AckedPerSec: float64(b.t.acked.Load()-acked0) / elapsed,
			AckP99:      latency(b.phaseSamples(int32(i))).P99,
			Errors:      b.t.refused.Load() + b.t.unacked.Load() - errs0,
			Verdict:     "ok",
		}
		switch {
		case step.Errors > 0:
			step.Verdict = "errors"
		case step.AckP99 > float64(o.rampMaxP99.Microseconds())/1000:
			step.Verdict = fmt.Sprintf("p99 over %v", o.rampMaxP99)
		case step.AckedPerSec < 0.9*r:
			step.Verdict = "below 90% of target"
		}
		res.Steps = append(res.Steps, step)
		if step.Verdict != "ok" {
			res.StoppedBecause = fmt.Sprintf("step at %.0f/s: %s", r, step.Verdict)
			break
		}
		res.MaxSustainable = step.AckedPerSec
		r *= o.rampFactor
	}
	return res
}

// phaseSamples copies the PUBACK latencies of messages sent in a phase.
func (b *bench) phaseSamples(ph int32) []int64 {
	var out []int64
	for _, c := range b.clients {
		c.samples.mu.Lock()
		out = append(out, c.samples.ack[ph]...)
		c.samples.mu.Unlock()
	}
	return out
}

// storm waits for half of the run, then drops every client's connection at
// once (no DISCONNECT, as a network outage would), reconnects them all at
// once with their persistent sessions and measures how long until all are
// back and until every delivery owed for acknowledged messages has arrived.
// Sending pauses meanwhile.
func (b *bench) storm(ctx context.Context) *StormResult {
	if !retry.Sleep(ctx, b.o.duration/2) {
		return nil
	}
	res := &StormResult{Clients: len(b.clients), AtSeconds: (b.t.now() - b.sendStart).Seconds()}
	b.paused.Store(true)
	defer b.paused.Store(false)
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range b.clients {
		wg.Add(1)
		go func() { defer wg.Done(); c.drop() }()
	}
	wg.Wait()
	res.PendingAtStorm = b.t.pending()
	var mu sync.Mutex
	for _, c := range b.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; ; attempt++ {
				err := c.connect(false)
				if err == nil {
					return
				}
				mu.Lock()
				res.ReconnectErrors++
				mu.Unlock()
				if attempt >= 20 || !retry.Sleep(context.Background(), 100*time.Millisecond) {
					return
				}
			}
		}()
	}
	wg.Wait()
	res.ReconnectSeconds = time.Since(t0).Seconds()
	res.CaughtUp = b.waitDelivered(context.Background(), 60*time.Second)
	res.CatchUpSeconds = time.Since(t0).Seconds()
	return res
}

// receipts summarises -mode receipts.
func (b *bench) receipts(window float64) *ReceiptsResult {
	t := b.t
	r := &ReceiptsResult{Sent: t.readsSent.Load(), Acked: t.readsAcked.Load(), Failed: t.readsFailed.Load(),
		ReadUpdated: t.readUpdated.Load(), AckLatency: latency(t.readLat)}
	if window > 0 {
		r.PerSec = float64(r.Acked) / window
	}
	return r
}
