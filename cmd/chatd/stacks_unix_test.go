//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestChatdReexecutesItselfWithSmallStacks(t *testing.T) {
	for _, c := range []struct {
		godebug, want string // the GODEBUG the child starts with; that it runs with (changed: by the exec)
	}{
		{"gctrace=0", "gctrace=0,adaptivestackstart=0"},
		{"adaptivestackstart=1", "adaptivestackstart=1"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), reexecProbe+"=before", "GODEBUG="+c.godebug)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GODEBUG=%s: child: %v (%s)", c.godebug, err, out)
		}
		var before, after int
		var godebug string
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 {
			t.Fatalf("GODEBUG=%s: child printed %q", c.godebug, out)
		}
		fmt.Sscanf(lines[0], "before %d", &before)
		fmt.Sscanf(lines[1], "after %d %s", &after, &godebug)
		if before == 0 || before != after {
			t.Fatalf("GODEBUG=%s: process id %d before, %d after: exec must keep the process", c.godebug, before, after)
		}
		if godebug != c.want {
			t.Fatalf("GODEBUG=%s: the process runs with GODEBUG=%q, want %q", c.godebug, godebug, c.want)
		}
	}
}
