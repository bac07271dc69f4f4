package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is the result of a run; its JSON is chatbench's machine-readable
// output (-json).
type Report struct {
	Target        string  `json:"target"` // "chatd" or "plain"
	Mode          string  `json:"mode"`
	Broker        string  `json:"broker"`
	MQTTVersion   int     `json:"mqttVersion"`
	Clients       int     `json:"clients"`
	Conversations int     `json:"conversations"`
	Direct        int     `json:"direct"`
	Groups        int     `json:"groups"`
	AvgMembers    float64 `json:"avgMembers"`
	BodyBytes     int     `json:"bodyBytes"`
	Inflight      int     `json:"inflight"`
	TargetRate    float64 `json:"targetRate"` // 0 = as fast as acks allow
	Persistent    bool    `json:"persistent"`
	SetupSeconds  float64 `json:"setupSeconds"`
	SendSeconds   float64 `json:"sendSeconds"`
	DrainSeconds  float64 `json:"drainSeconds"` // waited after sending for outstanding deliveries
	Drained       bool    `json:"drained"`      // every owed delivery arrived within -drain

	Sent             int64            `json:"sent"`
	Acked            int64            `json:"acked"`
	Refused          int64            `json:"refused"`  // PUBACK >= 0x80 or error event, final
	Retried          int64            `json:"retried"`  // resends after PUBACK 0x80/0x83 (same clientMsgId)
	Unacked          int64            `json:"unacked"`  // no PUBACK (connection lost)
	Expected         int64            `json:"expected"` // deliveries owed for acked messages
	Delivered        int64            `json:"delivered"`
	DeliveredUnacked int64            `json:"deliveredUnacked"` // deliveries of messages whose PUBACK was lost
	Duplicates       int64            `json:"duplicates"`
	Gaps             int64            `json:"gaps"`        // seq jumps seen by receivers
	GapMessages      int64            `json:"gapMessages"` // seqs skipped by them
	Lost             int64            `json:"lost"`        // owed deliveries not received by the end of the drain window
	AckedByKind      map[string]int64 `json:"ackedByKind"` // -edits, -reactions
	Unknown          int64            `json:"unknown"`     // deliveries of messages this run did not send
	LossExamples     []string         `json:"lossExamples,omitempty"`
	Errors           map[string]int64 `json:"errors,omitempty"`
	Retries          map[string]int64 `json:"retries,omitempty"`
	Events           map[string]int64 `json:"events"` // publishes received while measuring, by event type
	Setup            SetupInfo        `json:"setup"`

	AckedPerSec      float64 `json:"ackedPerSec"`
	DeliveriesPerSec float64 `json:"deliveriesPerSec"`
	AckLatency       Latency `json:"ackLatencyMs"`
	DeliveryLatency  Latency `json:"deliveryLatencyMs"`

	Chatd         *ProcStats      `json:"server,omitempty"`   // -chatd-pid: chatd, or the plain broker
	Postgres      *ProcStats      `json:"postgres,omitempty"` // -pg-pid: the postmaster and its backends
	CPUPerMessage *CPUPerMessage  `json:"cpuPerMessageUs,omitempty"`
	ServerMetrics *ServerMetrics  `json:"serverMetrics,omitempty"`
	Database      *DBCheck        `json:"database,omitempty"`
	Ramp          *RampResult     `json:"ramp,omitempty"`
	Storm         *StormResult    `json:"storm,omitempty"`
	Receipts      *ReceiptsResult `json:"receipts,omitempty"`

	Machine Machine `json:"machine"`
	OK      bool    `json:"ok"` // no loss, no gap, nothing refused, database check passed
}

// SetupInfo describes the setup: creating conversations, connecting, and
// waiting for the events that causes to be delivered.
type SetupInfo struct {
	Seconds       float64          `json:"seconds"`
	SettleSeconds float64          `json:"settleSeconds"` // of Seconds, waiting for setup events
	Settled       bool             `json:"settled"`
	Events        map[string]int64 `json:"events"` // received during the setup, by type
}

// Latency percentiles in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Machine describes where the bench ran and how busy it was while sending
// and draining.
type Machine struct {
	CPUs             int     `json:"cpus"`
	GoVersion        string  `json:"go"`
	BusyPercent      float64 `json:"busyPercent"`      // of all CPUs, every process
	ChatbenchPercent float64 `json:"chatbenchPercent"` // this load generator, of one core
}

// latency summarises microsecond samples (sorts them in place).
func latency(us []int64) Latency {
	if len(us) == 0 {
		return Latency{}
	}
	slices.Sort(us)
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(us)))) - 1
		return float64(us[max(i, 0)]) / 1000
	}
	return Latency{Count: int64(len(us)), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), P999: pct(0.999), Max: float64(us[len(us)-1]) / 1000}
}

// cpuPerMessage divides each process's CPU time over the run by the
// messages acknowledged in it.
func cpuPerMessage(acked int64, server, pg *ProcStats, selfSeconds float64) *CPUPerMessage {
	if acked == 0 || server == nil {
		return nil
	}
	us := func(s float64) float64 { return math.Round(1e7*s/float64(acked)) / 10 }
	c := &CPUPerMessage{Server: us(server.CPUSeconds), Chatbench: us(selfSeconds)}
	c.Total = c.Server
	if pg != nil {
		c.Postgres = us(pg.CPUSeconds)
		c.Total = us(server.CPUSeconds + pg.CPUSeconds)
	}
	return c
}

func machine() Machine { return Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()} }

func formatLoss(id string, conv, seq, missing int64) string {
	return fmt.Sprintf("message %s (conversation %d seq %d) missed by %d members", id, conv, seq, missing)
}

func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// writeTable prints the report for people.
func writeTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	verdict := "OK: every acknowledged message reached every member, in order"
	if r.Target == "plain" {
		verdict = "OK: every acknowledged message reached every subscriber"
	}
	if !r.OK {
		verdict = "FAILED: see lost / gaps / refused / database below"
		if !r.Drained && r.Gaps == 0 && r.Refused == 0 {
			verdict = "FAILED: deliveries still outstanding when the drain window ended (raise -drain to tell slow from lost)"
		}
	}
	fmt.Fprintf(tw, "chatbench\t%s, mode %s, MQTT %s, %s\n", r.Target, r.Mode, versionName(r.MQTTVersion), r.Broker)
	fmt.Fprintf(tw, "workload\t%d clients, %d conversations (%d direct, %d groups, %.1f members avg), %d-byte bodies, QoS 1, %s\n",
		r.Clients, r.Conversations, r.Direct, r.Groups, r.AvgMembers, r.BodyBytes, rateName(r.TargetRate, r.Inflight))
	fmt.Fprintf(tw, "duration\tsetup %.1fs, sending %.1fs, draining %.1fs\n", r.SetupSeconds, r.SendSeconds, r.DrainSeconds)
	if len(r.Setup.Events) > 0 {
		fmt.Fprintf(tw, "setup events\t%s delivered in %.1fs before measuring\n", formatCounts(r.Setup.Events), r.Setup.SettleSeconds)
	}
	fmt.Fprintf(tw, "messages\tsent %d, acked %d, refused %d, no PUBACK %d, resent after 0x80/0x83 %d\n", r.Sent, r.Acked, r.Refused, r.Unacked, r.Retried)
	fmt.Fprintf(tw, "deliveries\texpected %d, delivered %d, lost %d, duplicates %d, gaps %d (%d seqs), unknown %d\n",
		r.Expected, r.Delivered, r.Lost, r.Duplicates, r.Gaps, r.GapMessages, r.Unknown)
	fmt.Fprintf(tw, "events received\t%s\n", formatCounts(r.Events))
	fmt.Fprintf(tw, "throughput\t%.0f acked msgs/s, %.0f deliveries/s\n", r.AckedPerSec, r.DeliveriesPerSec)
	fmt.Fprintf(tw, "latency (ms)\tp50\tp90\tp99\tp99.9\tmax\n")
	for _, l := range []struct {
		name string
		l    Latency
	}{{"  publish->PUBACK", r.AckLatency}, {"  publish->delivery", r.DeliveryLatency}} {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", l.name, l.l.P50, l.l.P90, l.l.P99, l.l.P999, l.l.Max)
	}
	if c := r.Chatd; c != nil {
		name := "chatd"
		if r.Target == "plain" {
			name = "broker"
		}
		fmt.Fprintf(tw, "%s (pid %d)\tCPU %.1fs = %.0f%% of one core, RSS max %.0f MiB\n", name, c.PID, c.CPUSeconds, c.CPUPercent, c.RSSMaxMiB)
	}
	if p := r.Postgres; p != nil {
		fmt.Fprintf(tw, "PostgreSQL (postmaster %d and backends)\tCPU %.1fs = %.0f%% of one core, PSS %.0f MiB\n", p.PID, p.CPUSeconds, p.CPUPercent, p.PSSEndMiB)
	}
	if c := r.CPUPerMessage; c != nil {
		fmt.Fprintf(tw, "CPU per acked message\tserver %.1f µs + PostgreSQL %.1f µs = %.1f µs; chatbench %.1f µs\n", c.Server, c.Postgres, c.Total, c.Chatbench)
	}
	if m := r.ServerMetrics; m != nil {
		fmt.Fprintf(tw, "chatd metrics\tsend tx avg %.1f ms, delivery avg %.1f ms, pool acquire wait %.1fs, queue overflows %.0f, replayed from PostgreSQL %.0f\n",
			m.SendAvgMs, m.DeliveryAvgMs, m.PoolAcquireWaitSecs, m.QueueOverflows, m.Replayed)
	}
	if d := r.Database; d != nil {
		fmt.Fprintf(tw, "database\t%d rows in %d conversations, gapless %v, acked messages missing %d, stored twice %d\n",
			d.Rows, d.Conversations, d.Gapless, d.MissingAcked, d.Duplicated)
	}
	if rp := r.Ramp; rp != nil {
		fmt.Fprintf(tw, "ramp\ttarget/s\tacked/s\tp99 ms\terrors\tverdict\n")
		for _, s := range rp.Steps {
			fmt.Fprintf(tw, "\t%.0f\t%.0f\t%.1f\t%d\t%s\n", s.TargetRate, s.AckedPerSec, s.AckP99, s.Errors, s.Verdict)
		}
		fmt.Fprintf(tw, "max sustainable\t%.0f acked msgs/s (%s)\n", rp.MaxSustainable, rp.StoppedBecause)
	}
	if s := r.Storm; s != nil {
		fmt.Fprintf(tw, "storm\t%d clients dropped at %.1fs; all reconnected in %.2fs; caught up (%d deliveries outstanding) in %.2fs\n",
			s.Clients, s.AtSeconds, s.ReconnectSeconds, s.PendingAtStorm, s.CatchUpSeconds)
	}
	if rc := r.Receipts; rc != nil {
		fmt.Fprintf(tw, "receipts\tsent %d, acked %d, failed %d, read.updated received %d, %.0f receipts/s; PUBACK p50 %.2f ms p99 %.2f ms\n",
			rc.Sent, rc.Acked, rc.Failed, rc.ReadUpdated, rc.PerSec, rc.AckLatency.P50, rc.AckLatency.P99)
	}
	for k := range r.Errors {
		if h := limitHint(k); h != "" {
			fmt.Fprintf(tw, "hint\t%s\n", strings.TrimPrefix(h, "; "))
			break
		}
	}
	if len(r.Errors) > 0 {
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(tw, "error\t%d x %s\n", r.Errors[k], k)
		}
	}
	for k, n := range r.Retries {
		fmt.Fprintf(tw, "resent\t%d x %s\n", n, k)
	}
	for _, e := range r.LossExamples {
		fmt.Fprintf(tw, "lost\t%s\n", e)
	}
	fmt.Fprintf(tw, "machine\t%d CPUs %.0f%% busy during the run (chatbench itself %.0f%% of one core), %s\n",
		r.Machine.CPUs, r.Machine.BusyPercent, r.Machine.ChatbenchPercent, r.Machine.GoVersion)
	fmt.Fprintf(tw, "verdict\t%s\n", verdict)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func versionName(v int) string {
	if v == 4 {
		return "3.1.1"
	}
	return "5"
}

func rateName(rate float64, inflight int) string {
	if rate <= 0 {
		return fmt.Sprintf("as fast as PUBACKs allow (%d in flight per client)", inflight)
	}
	return fmt.Sprintf("target %s msgs/s", strings.TrimSuffix(fmt.Sprintf("%.0f", rate), ".0"))
}

// formatCounts lists counts as "a 3, b 2", largest first.
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
