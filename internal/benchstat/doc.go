// Package benchstat reads what the benchmarks report about processes from
// Linux's /proc: CPU seconds of a process or a process tree (a PostgreSQL
// postmaster and its backends), RSS and PSS, and the machine's busy share.
// Every function reads /proc afresh and is safe for concurrent use.
package benchstat
