package main

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// reexecProbe names the child of TestChatdReexecutesItselfWithSmallStacks
// to TestMain.
const reexecProbe = "CHATD_TEST_REEXEC_PROBE"

// probeReexec is what main does first, in a child process: it prints its
// process id before and after reexecWithSmallStacks, and GODEBUG after.
func probeReexec() {
	if os.Getenv(reexecProbe) == "before" {
		fmt.Printf("before %d\n", os.Getpid())
		// After the exec the probe reports instead of re-executing.
		os.Setenv(reexecProbe, "after")
		reexecWithSmallStacks()
	}
	fmt.Printf("after %d %s\n", os.Getpid(), os.Getenv("GODEBUG"))
}

func TestSmallStacksEnvTurnsTheAdaptiveStackStartOffUnlessGODEBUGDecides(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=adaptivestackstart=0"}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "HOME=/"}, []string{"GODEBUG=adaptivestackstart=0", "HOME=/"}, true},
		{"other settings kept", []string{"GODEBUG=madvdontneed=1,gctrace=1"}, []string{"GODEBUG=madvdontneed=1,gctrace=1,adaptivestackstart=0"}, true},
		{"the operator's on", []string{"GODEBUG=adaptivestackstart=1"}, []string{"GODEBUG=adaptivestackstart=1"}, false},
		{"the operator's among others", []string{"GODEBUG=gctrace=1, adaptivestackstart=1"}, []string{"GODEBUG=gctrace=1, adaptivestackstart=1"}, false},
		// The runtime, like os.Getenv, reads the first of two GODEBUG
		// entries: that is the one that says and is changed.
		{"two GODEBUG entries", []string{"GODEBUG=gctrace=1", "GODEBUG=x=1"}, []string{"GODEBUG=gctrace=1,adaptivestackstart=0", "GODEBUG=x=1"}, true},
		{"the operator's in the first of two", []string{"GODEBUG=adaptivestackstart=1", "GODEBUG=x=1"}, []string{"GODEBUG=adaptivestackstart=1", "GODEBUG=x=1"}, false},
		{"already off (after the exec)", []string{"A=1", "GODEBUG=adaptivestackstart=0"}, []string{"A=1", "GODEBUG=adaptivestackstart=0"}, false},
	} {
		env := slices.Clone(c.env)
		got, changed := smallStacksEnv(env)
		if changed != c.changed || !slices.Equal(got, c.want) {
			t.Errorf("%s: smallStacksEnv(%q) = %q, %v; want %q, %v", c.name, c.env, got, changed, c.want, c.changed)
		}
		if !slices.Equal(env, c.env) {
			t.Errorf("%s: the caller's env changed to %q", c.name, env)
		}
	}
}
