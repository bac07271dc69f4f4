package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// deploy/chatd.service runs chatd as a dynamic user, which is in no group
// of the files an operator installs, and chatd reads its -config file
// itself (systemd reads only the EnvironmentFile, as root). The install
// line in the unit's header used to make the YAML file 0640 root:root:
// unreadable by chatd, which then stopped at start with "permission
// denied". The file the unit names must be installed readable by others,
// and secrets go in the environment file instead.
func TestTheUnitInstallsItsConfigFileReadableByItsDynamicUser(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "chatd.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	if !strings.Contains(unit, "\nDynamicUser=yes\n") || regexp.MustCompile(`\n(Group|SupplementaryGroups)=`).MatchString(unit) {
		t.Skip("the unit no longer runs as a dynamic user without groups: rethink this test")
	}
	exec := regexp.MustCompile(`\nExecStart=\S*chatd .*-config (\S+)`).FindStringSubmatch(unit)
	if exec == nil {
		t.Fatal("no ExecStart with -config in the unit")
	}
	install := regexp.MustCompile(`install (?:-\S+ )*-m (0?[0-7]{3,4}) (?:-\S+ )*configs/chatd\.yaml (\S+)`).FindStringSubmatch(unit)
	if install == nil || install[2] != exec[1] {
		t.Fatalf("the unit's header does not say how to install %s (found %q)", exec[1], install)
	}
	mode, err := strconv.ParseUint(install[1], 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	if mode&0o004 == 0 {
		t.Fatalf("the unit's header installs %s with mode %s: its dynamic user cannot read it", exec[1], install[1])
	}
}

// systemd's default KillMode (control-group) sends the stop's SIGTERM to
// every process of the unit at once: the embedded PostgreSQL's postmaster
// too, which takes it for a smart shutdown and refuses every new session
// ("FATAL: the database system is shutting down") while chatd drains its
// clients, flushes receipts and cursors and clears its presence, and
// /readyz still says ok. Only chatd may get the SIGTERM; it stops
// PostgreSQL itself, last (KillMode=mixed: the SIGKILL after
// TimeoutStopSec still reaches every process).
func TestTheUnitSignalsChatdAloneSoItsPostgreSQLOutlivesTheGracefulStop(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "chatd.service"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\nKillMode=(\S+)\n`).FindStringSubmatch(string(raw)); m == nil || m[1] != "mixed" {
		t.Fatalf("deploy/chatd.service: KillMode %q, want mixed (the default, control-group, sends SIGTERM to the embedded PostgreSQL too)", m)
	}
}
