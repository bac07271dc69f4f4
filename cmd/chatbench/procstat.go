package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/benchstat"
)

// ProcStats is a process's resource use during the run (-chatd-pid, or
// with -pg-pid the PostgreSQL postmaster and all its backends).
type ProcStats struct {
	PID        int     `json:"pid"`
	Tree       bool    `json:"tree,omitempty"` // the process and its descendants
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPercent float64 `json:"cpuPercent"` // of one core, over the measured window
	RSSMaxMiB  float64 `json:"rssMaxMiB,omitempty"`
	RSSEndMiB  float64 `json:"rssEndMiB,omitempty"`
	PSSEndMiB  float64 `json:"pssEndMiB,omitempty"` // tree: shared memory counted once
}

// CPUPerMessage is CPU time per acknowledged message, in microseconds, by
// process: what each costs a message whatever else the machine runs.
type CPUPerMessage struct {
	Server    float64 `json:"server"`             // chatd, or the plain broker
	Postgres  float64 `json:"postgres,omitempty"` // -pg-pid
	Total     float64 `json:"total"`              // server + PostgreSQL
	Chatbench float64 `json:"chatbench"`          // this load generator
}

// procSampler samples a process's RSS each second and its CPU time at start
// and end, from /proc; tree samplers add up the process's descendants.
type procSampler struct {
	pid      int
	tree     bool
	start    time.Time
	startCPU float64
	mu       sync.Mutex
	rssMax   float64
	stop     chan struct{}
	done     chan struct{}
}

func startProcSampler(pid int, tree bool) (*procSampler, error) {
	p := &procSampler{pid: pid, tree: tree, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	cpu, err := p.cpu()
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	p.startCPU = cpu
	go p.loop()
	return p, nil
}

func (p *procSampler) cpu() (float64, error) {
	if p.tree {
		return benchstat.TreeCPU(p.pid)
	}
	return benchstat.CPU(p.pid)
}

func (p *procSampler) loop() {
	defer close(p.done)
	if p.tree {
		return // a tree's RSS counts shared memory once per process; PSS is read at the end
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		p.sampleRSS()
		select {
		case <-t.C:
		case <-p.stop:
			return
		}
	}
}

func (p *procSampler) sampleRSS() float64 {
	rss, err := benchstat.RSS(p.pid)
	if err != nil {
		return 0
	}
	rss /= 1 << 20
	p.mu.Lock()
	p.rssMax = max(p.rssMax, rss)
	p.mu.Unlock()
	return rss
}

// finish stops sampling and returns the figures of the window.
func (p *procSampler) finish() *ProcStats {
	close(p.stop)
	<-p.done
	cpu, _ := p.cpu()
	wall := time.Since(p.start).Seconds()
	ps := &ProcStats{PID: p.pid, Tree: p.tree, CPUSeconds: cpu - p.startCPU}
	if wall > 0 {
		ps.CPUPercent = 100 * ps.CPUSeconds / wall
	}
	if p.tree {
		if pss, err := benchstat.TreePSS(p.pid); err == nil {
			ps.PSSEndMiB = pss / (1 << 20)
		}
		return ps
	}
	ps.RSSEndMiB = p.sampleRSS()
	p.mu.Lock()
	ps.RSSMaxMiB = p.rssMax
	p.mu.Unlock()
	return ps
}

// cpuWindow measures, over a window, the machine's busy share of all CPUs
// (/proc/stat) and this process's own CPU use, so a report shows whether
// the machine was saturated and what the load generator itself took.
type cpuWindow struct {
	start         time.Time
	busy0, total0 float64
	self0         float64
}

func startCPUWindow() *cpuWindow {
	w := &cpuWindow{start: time.Now()}
	w.busy0, w.total0, _ = benchstat.MachineCPU()
	w.self0, _ = benchstat.CPU(os.Getpid())
	return w
}

// finish returns the machine's busy percentage (of all CPUs), this
// process's CPU percentage (of one core) and its CPU seconds.
func (w *cpuWindow) finish() (machineBusy, self, selfSeconds float64) {
	busy, total, err := benchstat.MachineCPU()
	if err == nil && total > w.total0 {
		machineBusy = 100 * (busy - w.busy0) / (total - w.total0)
	}
	if s, err := benchstat.CPU(os.Getpid()); err == nil {
		selfSeconds = s - w.self0
		if wall := time.Since(w.start).Seconds(); wall > 0 {
			self = 100 * selfSeconds / wall
		}
	}
	return machineBusy, self, selfSeconds
}
