package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProcStats is chatd's resource use during the run (-chatd-pid).
type ProcStats struct {
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPercent float64 `json:"cpuPercent"` // of one core, over the measured window
	RSSMaxMiB  float64 `json:"rssMaxMiB"`
	RSSEndMiB  float64 `json:"rssEndMiB"`
}

// clockTicks is USER_HZ, 100 on every mainstream Linux.
const clockTicks = 100

// procSampler samples a process's RSS each second and its CPU time at start
// and end, from /proc.
type procSampler struct {
	pid      int
	start    time.Time
	startCPU float64
	mu       sync.Mutex
	rssMax   float64
	stop     chan struct{}
	done     chan struct{}
}

func startProcSampler(pid int) (*procSampler, error) {
	cpu, err := procCPU(pid)
	if err != nil {
		return nil, fmt.Errorf("-chatd-pid %d: %w", pid, err)
	}
	p := &procSampler{pid: pid, start: time.Now(), startCPU: cpu, stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p, nil
}

func (p *procSampler) loop() {
	defer close(p.done)
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
	rss, err := procRSS(p.pid)
	if err != nil {
		return 0
	}
	p.mu.Lock()
	p.rssMax = max(p.rssMax, rss)
	p.mu.Unlock()
	return rss
}

// finish stops sampling and returns the figures of the window.
func (p *procSampler) finish() *ProcStats {
	close(p.stop)
	<-p.done
	end := p.sampleRSS()
	cpu, _ := procCPU(p.pid)
	wall := time.Since(p.start).Seconds()
	ps := &ProcStats{PID: p.pid, CPUSeconds: cpu - p.startCPU, RSSEndMiB: end}
	if wall > 0 {
		ps.CPUPercent = 100 * ps.CPUSeconds / wall
	}
	p.mu.Lock()
	ps.RSSMaxMiB = p.rssMax
	p.mu.Unlock()
	return ps
}

// procCPU returns utime+stime of pid in seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// procRSS returns VmRSS of pid in MiB.
func procRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(f[0], 64)
				if err != nil {
					return 0, err
				}
				return kb / 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
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
	w.busy0, w.total0, _ = machineCPU()
	w.self0, _ = procCPU(os.Getpid())
	return w
}

// finish returns the machine's busy percentage (of all CPUs) and this
// process's CPU percentage (of one core).
func (w *cpuWindow) finish() (machineBusy, self float64) {
	busy, total, err := machineCPU()
	if err == nil && total > w.total0 {
		machineBusy = 100 * (busy - w.busy0) / (total - w.total0)
	}
	if s, err := procCPU(os.Getpid()); err == nil {
		if wall := time.Since(w.start).Seconds(); wall > 0 {
			self = 100 * (s - w.self0) / wall
		}
	}
	return machineBusy, self
}

// machineCPU reads the aggregate "cpu" line of /proc/stat: busy and total
// jiffies (idle and iowait count as not busy).
func machineCPU() (busy, total float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat")
	}
	for i, x := range f[1:] {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("unexpected /proc/stat: %w", err)
		}
		if i >= 7 { // guest time is already in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}
