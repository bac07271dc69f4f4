//go:build unix

package main

import (
	"os"

	"github.com/chatd/chatd/internal/benchstat"
)

// CPU accounting from /proc. On a machine whose cores other work shares,
// throughput measures the other work as much as the send path; the CPU
// time the send path itself spends per message does not, and on a
// CPU-bound server throughput is the cores divided by it. So the benchmark
// reports both.

// clusterCPU is the CPU seconds the PostgreSQL cluster whose data dir is
// dir has used: the postmaster, its live children (backends keep their
// connections), and the children it reaped (autovacuum workers and the
// like). 0 when dir is "" (a database given by URL).
func clusterCPU(dir string) float64 {
	if dir == "" {
		return 0
	}
	pm, err := benchstat.Postmaster(dir)
	if err != nil {
		return 0
	}
	s, _ := benchstat.TreeCPU(pm)
	return s
}

// selfCPU is this process's CPU seconds.
func selfCPU() float64 {
	s, _ := benchstat.CPU(os.Getpid())
	return s
}
