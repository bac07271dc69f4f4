//go:build unix

package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/procstate"
)

// Cluster is a running (or stopped) private PostgreSQL.
type Cluster struct {
	opts    Options
	binDir  string
	cred    *syscall.Credential
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start prepares the data directory (initdb on first use) and starts the
// server, waiting until it accepts connections.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// New validates options and prepares directories without starting.
func New(opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pgembed: DataDir is required")
	}
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve data dir: %w", err)
	}
	opts.DataDir = abs
	if opts.Port == 0 {
		opts.Port = 5432
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	bin, err := binariesFor(opts.DataDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, binDir: bin}
	if os.Geteuid() == 0 {
		cred, err := unprivileged(opts.RunAs)
		if err != nil {
			return nil, err
		}
		c.cred = cred
	}
	if c.opts.SocketDir == "" {
		c.opts.SocketDir = opts.DataDir
		// A Unix socket path must fit in 107 bytes.
		if len(filepath.Join(opts.DataDir, ".s.PGSQL."+strconv.Itoa(opts.Port))) > 100 {
			d, err := os.MkdirTemp("", "chatpg")
			if err != nil {
				return nil, fmt.Errorf("make socket dir: %w", err)
			}
			c.opts.SocketDir = d
		}
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("make data dir: %w", err)
	}
	if err := os.MkdirAll(c.opts.SocketDir, 0o700); err != nil {
		return nil, fmt.Errorf("make socket dir: %w", err)
	}
	if c.cred != nil {
		for _, d := range []string{opts.DataDir, c.opts.SocketDir} {
			if err := chownTree(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, err
			}
			if err := checkTraversable(d, c.cred); err != nil {
				return nil, err
			}
		}
	}
	c.logPath = filepath.Join(opts.DataDir, "postgres.log")
	return c, nil
}

func unprivileged(name string) (*syscall.Credential, error) {
	names := []string{name}
	if name == "" {
		names = []string{"postgres", "nobody"}
	}
	for _, n := range names {
		u, err := user.Lookup(n)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("pgembed: running as root and no unprivileged account (%s) exists to run PostgreSQL as", strings.Join(names, ", "))
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		return nil
	})
}

// checkTraversable fails early with a clear message when the unprivileged
// account cannot reach dir (a data dir under /root, for instance).
func checkTraversable(dir string, cred *syscall.Credential) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		mode := st.Mode().Perm()
		ok := mode&0o001 != 0 ||
			(sys.Uid == cred.Uid && mode&0o100 != 0) ||
			(sys.Gid == cred.Gid && mode&0o010 != 0)
		if !ok {
			return fmt.Errorf("pgembed: PostgreSQL runs as uid %d and cannot enter %s (mode %v); set CHAT_DATA_DIR to a directory outside it (e.g. /var/lib/chatd) or run chatd as a normal user", cred.Uid, p, mode)
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binPath(c.binDir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.Dir = "/"
	return cmd
}

// initialized reports whether DataDir holds a cluster initdb completed.
func (c *Cluster) initialized() bool {
	if _, err := os.Stat(c.initdbMarker()); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(c.opts.DataDir, "PG_VERSION"))
	return err == nil
}

// initdbMarker is the file that exists while initdb runs (initdb).
func (c *Cluster) initdbMarker() string { return c.opts.DataDir + ".initdb-incomplete" }

// initdb creates the cluster. A marker beside DataDir is there while
// initdb runs: an initdb interrupted (Ctrl-C during the first start)
// leaves it, so the next start takes what it left for no cluster, clears
// it and runs initdb again, instead of starting a half-made cluster.
func (c *Cluster) initdb(ctx context.Context) error {
	c.opts.Logger.Info("initializing embedded PostgreSQL cluster", "dir", c.opts.DataDir)
	marker := c.initdbMarker()
	if _, err := os.Stat(marker); err == nil {
		c.opts.Logger.Warn("removing what an interrupted initdb left", "dir", c.opts.DataDir)
		entries, err := os.ReadDir(c.opts.DataDir)
		if err != nil {
			return fmt.Errorf("clear an interrupted initdb: %w", err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(c.opts.DataDir, e.Name())); err != nil {
				return fmt.Errorf("clear an interrupted initdb: %w", err)
			}
		}
	}
	if err := os.WriteFile(marker, []byte("initdb of "+c.opts.DataDir+" under way or interrupted\n"), 0o600); err != nil {
		return fmt.Errorf("mark initdb under way: %w", err)
	}
	out, err := c.command(ctx, "initdb", "-D", c.opts.DataDir, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-instructions").CombinedOutput()
	if err != nil {
		return wrapRun("initdb", err, out)
	}
	if err := os.Remove(marker); err != nil {
		return fmt.Errorf("mark initdb done: %w", err)
	}
	return nil
}

// Start starts the postmaster (initdb first if needed). A server left
// running from a previous life of this data dir is stopped first.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil
	}
	if !c.initialized() {
		if err := c.initdb(ctx); err != nil {
			return err
		}
	}
	if err := c.stopStale(ctx); err != nil {
		return err
	}
	args := []string{"-D", c.opts.DataDir, "-k", c.opts.SocketDir, "-p", strconv.Itoa(c.opts.Port),
		"-c", "listen_addresses=", "-c", "unix_socket_permissions=0777"}
	for _, k := range slices.Sorted(maps.Keys(c.opts.Settings)) {
		args = append(args, "-c", k+"="+c.opts.Settings[k])
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open postgres log: %w", err)
	}
	cmd := exec.Command(binPath(c.binDir, "postgres"), args...)
	cmd.SysProcAttr = postmasterAttr(c.cred)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	c.cmd, c.done = cmd, done
	if err := c.waitReady(ctx, done); err != nil {
		// Immediate, bounded as Stop's: a postmaster that does not act
		// on it (stopped, or stuck) must not hold the start for ever.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(immediateWait):
			_ = cmd.Process.Kill()
			<-done
		}
		c.cmd, c.done = nil, nil
		return err
	}
	c.opts.Logger.Info("embedded PostgreSQL ready", "socket", c.SocketPath())
	return nil
}

// staleWait bounds how long Start waits for the postmaster a previous
// process left on this data dir to be gone.
const staleWait = 30 * time.Second

// stopStale makes sure the postmaster recorded in postmaster.pid is gone
// before a new one starts. PostgreSQL refuses to start while that pid is
// taken by any process (its lock-file check is kill(pid, 0)), so:
//   - a live process that runs in another directory is not this
//     cluster's (a postmaster and its backends run in their data dir):
//     the pid was reused, maybe by another cluster's postmaster, which is
//     left alone, and the stale file is removed;
//   - a live postgres there (one whose parent died without the parent-death
//     signal firing, or one still shutting down after it fired) gets
//     SIGINT (fast shutdown) and is waited for;
//   - a zombie (a postmaster SIGKILLed together with chatd, which init has
//     not reaped yet) runs nothing and is waited for until it is reaped,
//     a second or two;
//   - a pid taken by another program whose directory cannot be told is
//     left alone, as before: PostgreSQL decides.
//
// Then PostgreSQL's own crash recovery runs as the new postmaster starts.
// The caller holds the data dir (dbopen's lock), so no live chatd owns the
// postmaster recorded there.
func (c *Cluster) stopStale(ctx context.Context) error {
	pidFile := filepath.Join(c.opts.DataDir, "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return nil
	}
	deadline := time.Now().Add(staleWait)
	signalled, waitLogged := false, false
	for {
		st, name := procstate.Of(pid)
		in, known := procstate.InDir(pid, c.opts.DataDir)
		switch {
		case st == procstate.Gone:
			return nil
		case st == procstate.Running && known && !in:
			// Not this cluster's: a postmaster and its backends run in
			// their data dir. The pid was reused, on a host that may run
			// another PostgreSQL (whose postmaster a SIGINT would stop);
			// the file is stale, and PostgreSQL would refuse to start
			// while the pid it names is alive.
			c.opts.Logger.Warn("postmaster.pid names a process that does not serve this data dir (its pid was reused): leaving it alone and removing the stale file",
				"pid", pid, "program", name)
			if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale %s: %w", pidFile, err)
			}
			return nil
		case !strings.Contains(name, "postgres"):
			return nil
		case st == procstate.Running && !signalled:
			c.opts.Logger.Warn("stopping PostgreSQL left running on this data dir", "pid", pid)
			_ = syscall.Kill(pid, syscall.SIGINT)
			signalled = true
		case st == procstate.Zombie && !waitLogged:
			c.opts.Logger.Info("waiting for the exited PostgreSQL of a previous start to be reaped", "pid", pid)
			waitLogged = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the PostgreSQL recorded in %s (pid %d, %v) is still there after %v; PostgreSQL will not start while it exists: stop it, or if it is a zombie, make its parent reap it",
				pidFile, pid, st, staleWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the previous PostgreSQL (pid %d) to exit: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitReady(ctx context.Context, done <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("postgres exited during start-up; see %s: %s", c.logPath, tail(c.logPath))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		conn, err := net.DialTimeout("unix", c.SocketPath(), time.Second)
		if err == nil {
			conn.Close()
			pc, err := pgx.Connect(ctx, c.URL("postgres"))
			if err == nil {
				pc.Close(ctx)
				return nil
			}
			last = err
		} else {
			last = err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("postgres did not become ready in 60s: %v; see %s", last, c.logPath)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return strings.TrimSpace(string(b))
}

// SocketPath is the server's Unix socket.
func (c *Cluster) SocketPath() string {
	return filepath.Join(c.opts.SocketDir, ".s.PGSQL."+strconv.Itoa(c.opts.Port))
}

// URL is a connection string for database db over the Unix socket.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.opts.SocketDir, c.opts.Port, db)
}

// CreateDatabase creates db if it does not exist.
func (c *Cluster) CreateDatabase(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to create database: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}

// Exited is closed when the postmaster this Start started exits, whatever
// the reason (nil before Start).
func (c *Cluster) Exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// immediateWait bounds the wait for an immediate shutdown Stop asked for
// when its context ended; the postmaster SIGKILLs backends that ignore its
// SIGQUIT after 5 s itself.
const immediateWait = 10 * time.Second

// Stop shuts the server down: fast (SIGINT: roll back open transactions,
// checkpoint) unless immediate (SIGQUIT: no checkpoint, crash recovery on the
// next start, like `pg_ctl stop -m immediate`). It waits for exit. When ctx
// ends first, it turns the shutdown immediate and waits up to
// immediateWait more; only a postmaster that does not exit even then gets
// SIGKILL, which would leave its backends running without it.
func (c *Cluster) Stop(ctx context.Context, immediate bool) error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.cmd, c.done = nil, nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
		return fmt.Errorf("stop postgres: %w; stopped it immediately instead (crash recovery at the next start)", ctx.Err())
	case <-time.After(immediateWait):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("stop postgres: %w; killed it after an immediate shutdown did not end in %v", ctx.Err(), immediateWait)
	}
}

// DataDir is the cluster's PGDATA.
func (c *Cluster) DataDir() string { return c.opts.DataDir }
