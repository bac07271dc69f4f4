//go:build unix

package pgembed_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/procstate"
)

// zombiePostgres returns the pid of an exited, unreaped process named
// postgres, what a SIGKILLed postmaster is until init reaps it, and reap,
// which reaps it.
func zombiePostgres(t *testing.T) (pid int, reap func()) {
	t.Helper()
	bin, err := pgembed.FindBinaries()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "--version")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, _ := procstate.Of(cmd.Process.Pid); st == procstate.Zombie {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("postgres --version did not exit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var once sync.Once
	reap = func() { once.Do(func() { _ = cmd.Wait() }) }
	t.Cleanup(reap)
	return cmd.Process.Pid, reap
}

// A SIGKILLed postmaster answers kill(pid, 0) until it is reaped, but it is
// no server: FindPostmaster must not report it running.
func TestFindPostmasterDoesNotTakeAZombiePostmasterForARunningOne(t *testing.T) {
	dir := t.TempDir()
	pid, _ := zombiePostgres(t)
	writePID(t, dir, pid)
	if _, ok, err := pgembed.FindPostmaster(dir); ok || err != nil {
		t.Fatalf("zombie postmaster (pid %d): running=%v err=%v, want not running", pid, ok, err)
	}
}

// crash leaves dataDir's cluster as SIGKILL leaves it: every process of the
// cluster killed, postmaster.pid in place and naming a postmaster that is
// a zombie until reap is called (as if init had not reaped it yet).
func crash(t *testing.T, dataDir string, closeDB func(context.Context) error) (reap func()) {
	t.Helper()
	pidFile := filepath.Join(pgembed.PGDir(dataDir), "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := pgembed.ParsePostmasterPID(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pm.PID, syscall.SIGKILL); err != nil { // the postmaster's process group: it and its backends
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = closeDB(ctx) // the owner is gone too: its lock is released
	zombie, reap := zombiePostgres(t)
	_, rest, _ := strings.Cut(string(raw), "\n")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(zombie)+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	return reap
}

// chatd restarted at once after a kill -9 of itself and its PostgreSQL
// finds the old postmaster a zombie. It must neither take it for a running
// server (and wait 30 s for it to answer) nor start PostgreSQL over it
// (which refuses while the pid exists): it waits until the pid is gone,
// starts the cluster and PostgreSQL's crash recovery keeps what was
// committed.
func TestOpenOwnerAfterAKillWaitsForTheZombiePostmasterThenRecovers(t *testing.T) {
	ctx := context.Background()
	dir, pool, closeDB := startCluster(t, pgembed.OpenOwner, 2)
	writeMarker(t, ctx, pool)
	reap := crash(t, dir, closeDB)

	const zombieFor = time.Second
	start := time.Now()
	go func() {
		time.Sleep(zombieFor)
		reap()
	}()
	pool, closeDB, err := pgembed.OpenOwner(ctx, "", dir, 2, quietLogger())
	took := time.Since(start)
	if err != nil {
		t.Fatalf("restart after the kill, %v later: %v", took.Round(time.Millisecond), err)
	}
	defer closeDB(ctx)
	wantMarker(t, ctx, pool, "committed row lost across the crash")
	if took < zombieFor {
		t.Errorf("cluster started after %v, before the zombie was reaped at %v", took, zombieFor)
	}
	t.Logf("restarted %v after the kill; the zombie was reaped after %v", took.Round(time.Millisecond), zombieFor)
}

// A second owner of a data dir (a second chatd) is refused with a message
// that says what to do; chatctl's Open still joins the running cluster;
// after the owner closes, the next owner starts. Nodes sharing an external
// database take no lock.
func TestOpenOwnerRefusesADataDirThatAnotherLiveOwnerServes(t *testing.T) {
	ctx := context.Background()
	dir, first, closeFirst := startCluster(t, pgembed.OpenOwner, 2)
	defer closeFirst(ctx)
	_, closeSecond, err := pgembed.OpenOwner(ctx, "", dir, 2, quietLogger())
	if err == nil {
		closeSecond(ctx)
		t.Fatal("a second owner of the data dir was let in")
	}
	if !errors.Is(err, pgembed.ErrDataDirInUse) || !strings.Contains(err.Error(), "CHAT_DATABASE_URL") || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("second owner: %v; want ErrDataDirInUse naming the holder and what to do", err)
	}
	joined, closeJoined, err := pgembed.Open(ctx, "", dir, 2, quietLogger())
	if err != nil {
		t.Fatalf("chatctl beside the owner: %v", err)
	}
	if err := joined.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	closeJoined(ctx)
	if err := first.Ping(ctx); err != nil {
		t.Fatalf("the joiner's close broke the owner: %v", err)
	}
	if err := closeFirst(ctx); err != nil {
		t.Fatal(err)
	}
	_, closeNext, err := pgembed.OpenOwner(ctx, "", dir, 2, quietLogger())
	if err != nil {
		t.Fatalf("owner after the first closed: %v", err)
	}
	closeNext(ctx)

	url := pgtest.NewDB(t)
	for i := 0; i < 2; i++ {
		_, c, err := pgembed.OpenOwner(ctx, url, dir, 2, quietLogger())
		if err != nil {
			t.Fatalf("node %d on the external database: %v", i, err)
		}
		defer c(ctx)
	}
}

// Ctrl-C (or SIGTERM) during chatd's first start used to kill initdb
// half-way and leave a cluster with PG_VERSION but no catalog: every later
// start took it for initialised and never became ready (PostgreSQL crashed
// on `could not find relation mapping for relation "pg_database"` in a
// loop), with nothing saying to delete <data dir>/pg. An interrupted
// initdb now leaves nothing the next start mistakes for a cluster.
func TestAStartInterruptedDuringInitdbLeavesADataDirTheNextStartInitialises(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	dir := dataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if m, _ := filepath.Glob(filepath.Join(dir, "*", "PG_VERSION")); len(m) > 0 {
				return // initdb is under way: interrupt it
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, closeDB, err := pgembed.OpenOwner(ctx, "", dir, 2, quietLogger()); err == nil {
		closeDB(context.Background())
		t.Skip("initdb finished before it could be interrupted")
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel2()
	pool, closeDB, err := pgembed.OpenOwner(ctx2, "", dir, 2, quietLogger())
	if err != nil {
		logTail, _ := os.ReadFile(filepath.Join(pgembed.PGDir(dir), "postgres.log"))
		if len(logTail) > 2000 {
			logTail = logTail[len(logTail)-2000:]
		}
		t.Fatalf("the start after an interrupted initdb: %v\npostgres.log ends:\n%s", err, logTail)
	}
	defer closeDB(context.Background())
	writeMarker(t, ctx2, pool)
	wantMarker(t, ctx2, pool, "the cluster after an interrupted initdb")
}
