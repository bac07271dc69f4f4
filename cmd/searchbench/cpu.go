package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPU accounting from /proc. On a machine whose cores other work shares,
// throughput measures the other work as much as the send path; the CPU
// time the send path itself spends per message does not, and on a
// CPU-bound server throughput is the cores divided by it. So the benchmark
// reports both.

// clockTicks is USER_HZ, 100 on every mainstream Linux.
const clockTicks = 100

// procTimes returns utime+stime and cutime+cstime (reaped children) of pid
// in seconds, and its parent's pid.
func procTimes(pid int) (own, children float64, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	var v [4]float64
	for k := range v {
		if v[k], err = strconv.ParseFloat(f[11+k], 64); err != nil {
			return 0, 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
		}
	}
	ppid, _ = strconv.Atoi(f[1])
	return (v[0] + v[1]) / clockTicks, (v[2] + v[3]) / clockTicks, ppid, nil
}

// clusterCPU is the CPU seconds the PostgreSQL cluster whose data dir is
// dir has used: the postmaster, its live children (backends keep their
// connections), and the children it reaped (autovacuum workers and the
// like). 0 when dir is "" (a database given by URL).
func clusterCPU(dir string) float64 {
	if dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	own, reaped, _, err := procTimes(pm)
	if err != nil {
		return 0
	}
	total := own + reaped
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if o, _, pp, err := procTimes(pid); err == nil && pp == pm {
			total += o
		}
	}
	return total
}

// selfCPU is this process's CPU seconds.
func selfCPU() float64 {
	own, _, _, _ := procTimes(os.Getpid())
	return own
}
