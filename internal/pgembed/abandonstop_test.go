//go:build unix

package pgembed_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
)

// stopOnReady is a log handler that freezes the postmaster (SIGSTOP) when
// the cluster says it is ready, before chatd's first statement: a
// postmaster that takes no connection and does not act on a shutdown
// signal (a host swapping, a disk that no longer answers).
type stopOnReady struct {
	slog.Handler
	pgDir string
	pid   chan int
}

func (h stopOnReady) Enabled(context.Context, slog.Level) bool { return true }

func (h stopOnReady) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "embedded PostgreSQL ready") {
		raw, _ := os.ReadFile(filepath.Join(h.pgDir, "postmaster.pid"))
		if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			h.pid <- pid
		}
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// A start given up after the cluster started (its database not created:
// the context ended, the postmaster stopped answering) stops the cluster
// within a bound: a fast shutdown for a while, then an immediate one, then
// SIGKILL, as a node's stop does. It used to wait for the fast shutdown
// with no deadline, so a postmaster that did not act on it held the start,
// and the process, for ever.
func TestAStartGivenUpAfterTheClusterStartedStopsItWithinABound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	dir := dataDir(t)
	h := stopOnReady{Handler: quietLogger().Handler(), pgDir: pgembed.PGDir(dir), pid: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case pid := <-h.pid:
			// Let its connection attempt hang a moment, then give up.
			time.Sleep(500 * time.Millisecond)
			cancel()
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); _ = syscall.Kill(pid, syscall.SIGCONT) })
		case <-ctx.Done():
		}
	}()
	if returned, err := openGivenUp(ctx, dir, slog.New(h)); !returned {
		t.Fatal("the start given up has not returned 60 s later: the stop of its cluster waits for ever")
	} else if err == nil {
		t.Fatal("the start succeeded with its postmaster frozen")
	}
}

// openGivenUp opens the cluster in dir with ctx, which the caller cancels
// while the start hangs, and says whether the start returned within 60 s
// and with what.
func openGivenUp(ctx context.Context, dir string, log *slog.Logger) (returned bool, err error) {
	done := make(chan error, 1)
	go func() {
		_, closeDB, err := pgembed.OpenOwner(ctx, "", dir, 2, log)
		if err == nil {
			_ = closeDB(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		return true, err
	case <-time.After(60 * time.Second):
		return false, nil
	}
}

// A start given up while the postmaster starts (before it is ready)
// stops it within a bound too: an immediate shutdown, then SIGKILL, not
// a wait for the immediate shutdown with no deadline.
func TestAStartGivenUpWhileThePostmasterStartsStopsItWithinABound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	dir := dataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pidFile := filepath.Join(pgembed.PGDir(dir), "postmaster.pid")
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			// initdb writes no postmaster.pid; the postmaster does, first.
			raw, _ := os.ReadFile(pidFile)
			if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); _ = syscall.Kill(pid, syscall.SIGCONT) })
				time.Sleep(500 * time.Millisecond)
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if returned, err := openGivenUp(ctx, dir, quietLogger()); !returned {
		t.Fatal("the start given up has not returned 60 s later: the stop of its postmaster waits for ever")
	} else if err == nil {
		t.Skip("the postmaster was ready before it could be frozen")
	}
}
