package main

import "strings"

// stackStart is the runtime setting (GODEBUG) that starts each new
// goroutine with a stack as large as the average one the last collection
// scanned. chatd's goroutines are mostly mochi's two per connection, and
// the write goroutine, blocked in its select, counts about 2.9 KiB in use
// (its 1.8 KiB frame plus the runtime's allowance): started at the
// average 8 KiB it never halves to 4 KiB (the runtime halves a stack only
// below a quarter in use), started at 2 KiB it grows to 4 KiB and stays.
// Off, an idle connection holds the stacks plain mochi's does
// (docs/benchmarks.md, Efficiency, item 14).
const stackStart = "adaptivestackstart"

// smallStacksEnv returns env with stackStart off in GODEBUG, and whether
// that changed it: a setting of it already there (an operator's) is kept.
func smallStacksEnv(env []string) ([]string, bool) {
	at, godebug := -1, ""
	for i, kv := range env {
		// The first: the runtime (and os.Getenv) reads the first of
		// two entries.
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			at, godebug = i, v
			break
		}
	}
	for _, s := range strings.Split(godebug, ",") {
		if k, _, _ := strings.Cut(strings.TrimSpace(s), "="); k == stackStart {
			return env, false
		}
	}
	setting := stackStart + "=0"
	if godebug != "" {
		setting = godebug + "," + setting
	}
	out := append([]string(nil), env...)
	if at < 0 {
		return append(out, "GODEBUG="+setting), true
	}
	out[at] = "GODEBUG=" + setting
	return out, true
}
