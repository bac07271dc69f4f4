package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/procstate"
)

// Postmaster is a PostgreSQL server found through the postmaster.pid of its
// data directory. This code is independent of pgembed: it works for any
// server that listens on a Unix socket and trusts local connections by the
// "postgres" role, as chatd's embedded cluster does.
type Postmaster struct {
	PID       int
	DataDir   string // line 2
	Port      int    // line 4
	SocketDir string // line 5: first unix_socket_directories entry
	Status    string // line 8 when present: ready, starting, stopping, standby
}

// SocketPath is the server's Unix socket.
func (p Postmaster) SocketPath() string {
	return filepath.Join(p.SocketDir, ".s.PGSQL."+strconv.Itoa(p.Port))
}

// URL is a connection string for database db over the Unix socket.
func (p Postmaster) URL(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", p.SocketDir, p.Port, db)
}

// ParsePostmasterPID parses the contents of a postmaster.pid file (the
// PostgreSQL 10+ layout: pid, data dir, start time, port, socket dir,
// listen address, shmem key, status).
func ParsePostmasterPID(raw string) (Postmaster, error) {
	lines := strings.Split(raw, "\n")
	if len(lines) < 5 {
		return Postmaster{}, fmt.Errorf("has %d lines, want at least 5", len(lines))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return Postmaster{}, fmt.Errorf("line 1 is not a pid: %q", lines[0])
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil || port <= 0 || port > 65535 {
		return Postmaster{}, fmt.Errorf("line 4 is not a port: %q", lines[3])
	}
	p := Postmaster{
		PID:       pid,
		DataDir:   strings.TrimSpace(lines[1]),
		Port:      port,
		SocketDir: strings.TrimSpace(lines[4]),
	}
	if len(lines) >= 8 {
		p.Status = strings.TrimSpace(lines[7])
	}
	return p, nil
}

// pidFileWait bounds the wait for a postmaster.pid being written.
const pidFileWait = 10 * time.Second

// FindPostmaster reports the live postmaster owning pgDataDir, if any. A
// missing postmaster.pid, or one whose process is gone (or is no longer a
// postgres, or runs in another directory: another cluster's), is "none"
// and not an error: a start clears stale pid files.
func FindPostmaster(pgDataDir string) (Postmaster, bool, error) {
	path := filepath.Join(pgDataDir, "postmaster.pid")
	deadline := time.Now().Add(pidFileWait)
	var p Postmaster
	for {
		raw, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return Postmaster{}, false, nil
		}
		if err != nil {
			return Postmaster{}, false, fmt.Errorf("read %s: %w", path, err)
		}
		if p, err = ParsePostmasterPID(string(raw)); err == nil {
			break
		}
		// A server starting right now writes the file in steps (the socket
		// line comes last): wait for it while its pid is alive. Otherwise
		// the file is damaged, and we must not start a server over it.
		first, _, _ := strings.Cut(string(raw), "\n")
		pid, perr := strconv.Atoi(strings.TrimSpace(first))
		if perr == nil && pid > 0 && !serves(pid, pgDataDir) {
			return Postmaster{}, false, nil
		}
		if perr != nil || time.Now().After(deadline) {
			return Postmaster{}, false, fmt.Errorf("read %s: %v; if no PostgreSQL is running on this directory, delete the file", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !serves(p.PID, pgDataDir) {
		return Postmaster{}, false, nil
	}
	if p.SocketDir == "" {
		return Postmaster{}, false, fmt.Errorf("PostgreSQL (pid %d) owns %s but has no Unix socket; stop it, or set CHAT_DATABASE_URL to reach it over TCP", p.PID, pgDataDir)
	}
	return p, true, nil
}

// processAlive reports whether pid is a running postgres process: not gone,
// not a zombie (a SIGKILLed postmaster that is not reaped yet answers
// kill(pid, 0) but serves nothing), and not another program that reused
// the pid of a stale file.
func processAlive(pid int) bool {
	st, name := procstate.Of(pid)
	return st == procstate.Running && (name == "" || strings.Contains(name, "postgres"))
}

// serves reports whether pid is a running postgres process that may be
// the postmaster of pgDataDir: processAlive, and not running in another
// directory (a postmaster and its backends run in their data dir), which
// a pid of a stale file reused by another cluster's postgres does.
func serves(pid int, pgDataDir string) bool {
	if !processAlive(pid) {
		return false
	}
	in, known := procstate.InDir(pid, pgDataDir)
	return in || !known
}

// WaitReady waits up to timeout for the server to accept connections (it
// may still be starting). It re-checks that the postmaster is alive each
// time: one that exits or turns out a zombie is no server to wait for, and
// WaitReady then fails at once with an error wrapping errNotRunning.
func (p Postmaster) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if !processAlive(p.PID) {
			return fmt.Errorf("PostgreSQL (pid %d) of %s exited: %w", p.PID, p.DataDir, errNotRunning)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, p.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for PostgreSQL (pid %d): %w", p.PID, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("PostgreSQL (pid %d) owns %s but does not accept connections on %s: %w; wait for it to finish starting, or stop it (is chatd shutting down?)",
		p.PID, p.DataDir, p.SocketPath(), last)
}
