package pgembed_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
)

// After a reboot (or any crash that left postmaster.pid behind) the pid
// the file names may belong to another process by now, and on a host that
// runs PostgreSQL for something else that process may well be another
// cluster's postmaster or backend, named postgres. A start took any live
// postgres there for this cluster's postmaster left running and stopped it
// (SIGINT: a postmaster's fast shutdown), so starting chatd shut down the
// other database. A process whose working directory is not this data dir
// (a postmaster and its backends run in their own) is not this cluster's:
// it is left alone, and the stale file is what it is.
func TestAStalePidThatIsAnotherClustersPostmasterIsLeftRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other, err := pgembed.Start(ctx, pgembed.Options{DataDir: dataDir(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(context.Background(), false) })
	raw, err := os.ReadFile(filepath.Join(other.DataDir(), "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	otherPID, _, _ := strings.Cut(string(raw), "\n")

	dir := dataDir(t)
	c, err := pgembed.Start(ctx, pgembed.Options{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	// What a crash leaves: this cluster's postmaster.pid, its pid since
	// taken by the other cluster's postmaster.
	stale := otherPID + "\n" + dir + "\n1764900000\n5432\n" + dir + "\n\n  5432001     32768\nready   \n"
	if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}

	// chatctl beside no running chatd looks for the cluster's postmaster
	// to join: that process is not it (it used to be, and chatctl waited
	// 30 s for it on this data dir's socket, then failed).
	if p, ok, err := pgembed.FindPostmaster(dir); ok || err != nil {
		t.Errorf("FindPostmaster with the stale file: %+v, %v, %v; want none", p, ok, err)
	}

	c, err = pgembed.Start(ctx, pgembed.Options{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("start with a stale postmaster.pid naming another cluster's postmaster: %v", err)
	}
	defer c.Stop(context.Background(), false)
	select {
	case <-other.Exited():
		t.Fatalf("the other cluster's postmaster (pid %s) was stopped by this cluster's start", otherPID)
	case <-time.After(time.Second):
	}
}
