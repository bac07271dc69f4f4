package benchstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every mainstream Linux.
const clockTicks = 100

// stat is the part of /proc/PID/stat the benchmarks read.
type stat struct {
	ppid           int
	utime, stime   float64 // this process, seconds
	cutime, cstime float64 // its reaped children, seconds
}

func readStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	// Fields after the command: state ppid pgrp session tty_nr tpgid flags
	// minflt cminflt majflt cmajflt utime stime cutime cstime ...
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	var st stat
	var errs [5]error
	st.ppid, errs[0] = strconv.Atoi(f[1])
	st.utime, errs[1] = strconv.ParseFloat(f[11], 64)
	st.stime, errs[2] = strconv.ParseFloat(f[12], 64)
	st.cutime, errs[3] = strconv.ParseFloat(f[13], 64)
	st.cstime, errs[4] = strconv.ParseFloat(f[14], 64)
	for _, e := range errs {
		if e != nil {
			return stat{}, fmt.Errorf("unexpected /proc/%d/stat: %w", pid, e)
		}
	}
	st.utime /= clockTicks
	st.stime /= clockTicks
	st.cutime /= clockTicks
	st.cstime /= clockTicks
	return st, nil
}

// CPU returns utime+stime of pid in seconds.
func CPU(pid int) (float64, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return st.utime + st.stime, nil
}

// TreeCPU returns the CPU seconds of pid and all its descendants, the
// living and the exited ones: a PostgreSQL postmaster's backends and
// workers come and go, and an exited child's time moves into its parent's
// cutime/cstime when it is reaped, so the sum never loses a child's time.
func TreeCPU(pid int) (float64, error) {
	root, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	total := root.utime + root.stime + root.cutime + root.cstime
	for _, p := range descendants(pid) {
		st, err := readStat(p)
		if err != nil {
			continue // exited meanwhile: its time is in its parent's cutime now or soon
		}
		total += st.utime + st.stime
	}
	return total, nil
}

// descendants lists the living descendants of pid.
func descendants(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	children := map[int][]int{}
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := readStat(p)
		if err != nil {
			continue
		}
		children[st.ppid] = append(children[st.ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// RSS returns VmRSS of pid in bytes.
func RSS(pid int) (float64, error) {
	return statusField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
}

// TreePSS returns the proportional set size of pid and its descendants in
// bytes: shared memory (PostgreSQL's shared buffers) counts once over the
// tree instead of once per process as RSS would.
func TreePSS(pid int) (float64, error) {
	total, err := statusField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:")
	if err != nil {
		return 0, err
	}
	for _, p := range descendants(pid) {
		if v, err := statusField(fmt.Sprintf("/proc/%d/smaps_rollup", p), "Pss:"); err == nil {
			total += v
		}
	}
	return total, nil
}

// statusField reads a "Name:   123 kB" line of a /proc file, in bytes.
func statusField(path, name string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(f[0], 64)
				if err != nil {
					return 0, fmt.Errorf("read %s %s: %w", path, name, err)
				}
				return kb * 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("no %s in %s", name, path)
}

// MachineCPU reads the aggregate "cpu" line of /proc/stat: busy and total
// jiffies (idle and iowait count as not busy).
func MachineCPU() (busy, total float64, err error) {
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

// Postmaster reads the postmaster's pid from a PostgreSQL data directory.
func Postmaster(pgdata string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", filepath.Join(pgdata, "postmaster.pid"), err)
	}
	return pid, nil
}
