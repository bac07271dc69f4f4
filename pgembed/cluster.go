package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configure a cluster. DataDir is required.
type Options struct {
	DataDir   string            // PGDATA; created and initdb'ed when empty
	SocketDir string            // where the Unix socket lives; default DataDir (or a short temp dir when DataDir's path is too long)
	Port      int               // names the socket file only; default 5432
	RunAs     string            // OS account when running as root; default "postgres", else "nobody"
	Settings  map[string]string // extra postgres -c settings
	Logger    *slog.Logger
}

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
	bin, err := FindBinaries()
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

func (c *Cluster) initialized() bool {
	_, err := os.Stat(filepath.Join(c.opts.DataDir, "PG_VERSION"))
	return err == nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	c.opts.Logger.Info("initializing embedded PostgreSQL cluster", "dir", c.opts.DataDir)
	out, err := c.command(ctx, "initdb", "-D", c.opts.DataDir, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-instructions").CombinedOutput()
	if err != nil {
		return wrapRun("initdb", err, out)
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
	c.stopStale()
	args := []string{"-D", c.opts.DataDir, "-k", c.opts.SocketDir, "-p", strconv.Itoa(c.opts.Port),
		"-c", "listen_addresses=", "-c", "unix_socket_permissions=0777"}
	keys := make([]string, 0, len(c.opts.Settings))
	for k := range c.opts.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+c.opts.Settings[k])
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open postgres log: %w", err)
	}
	cmd := exec.Command(binPath(c.binDir, "postgres"), args...)
	// Pdeathsig: if our process dies, the postmaster does a fast shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
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
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		<-done
		c.cmd, c.done = nil, nil
		return err
	}
	c.opts.Logger.Info("embedded PostgreSQL ready", "socket", c.SocketPath())
	return nil
}

// stopStale stops a postmaster that a previous process left running on this
// data dir (only possible if Pdeathsig did not fire, e.g. a PID reused).
func (c *Cluster) stopStale() {
	raw, err := os.ReadFile(filepath.Join(c.opts.DataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	if syscall.Kill(pid, 0) != nil {
		return
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if !strings.Contains(exe, "postgres") {
		return
	}
	c.opts.Logger.Warn("stopping PostgreSQL left running on this data dir", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGINT)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
		time.Sleep(50 * time.Millisecond)
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

// Running reports whether the postmaster child is alive.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd != nil
}

// Stop shuts the server down: fast (SIGINT: roll back open transactions,
// checkpoint) unless immediate (SIGQUIT: no checkpoint, crash recovery on the
// next start, like `pg_ctl stop -m immediate`). It waits for exit.
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
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("stop postgres: %w", ctx.Err())
	}
}

// DataDir is the cluster's PGDATA.
func (c *Cluster) DataDir() string { return c.opts.DataDir }
