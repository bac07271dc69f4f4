// Package faults_test is the fault suite of issue 9: every scenario runs a
// real chatd against a real PostgreSQL, drives load, injects one fault and
// checks the invariants at the end (see invariants_test.go and
// docs/faults.md). The tests stop and restart this binary's PostgreSQL
// cluster, so they run one at a time, and the package has its own
// cluster (TestMain) so no other package is disturbed. Only the
// weak-network tests call t.Parallel: they spend their time waiting on
// toxiproxy's latency, bandwidth and blackhole, bound nothing by the wall
// clock but generous deadlines, and go runs them after every sequential
// test has finished, when nothing stops the cluster any more.
package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
	"github.com/chatd/chatd/store"
)

var binDir string

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// noLimits turns every rate limit off: these tests are about faults, not
// about limits.
var noLimits = map[string]string{
	"CHAT_LIMIT_SEND_RATE":             "0",
	"CHAT_LIMIT_CONV_RATE":             "0",
	"CHAT_LIMIT_CONNECT_RATE":          "0",
	"CHAT_LIMIT_CONNECT_USER_RATE":     "0",
	"CHAT_MAX_CONNECTIONS_PER_USER":    "0",
	"CHAT_CONNECT_BUDGET_RATE":         "0",
	"CHAT_MAX_PENDING_CONNECTS_PER_IP": "0",
	"CHAT_LIMIT_API_RATE":              "0",
	"CHAT_LIMIT_READ_RATE":             "0",
	"CHAT_LIMIT_TYPING_RATE":           "0",
	"CHAT_PRESENCE_PUSH":               "false",

	"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP": "0",
}

// inCI is true under .ci/run, where the long scenarios run shortened.
func inCI() bool { return os.Getenv("CI") != "" }

// knob reads a duration from env (e.g. FAULTS_PG_OUTAGE=10s); def applies
// locally and ci under CI.
func knob(env string, def, ci time.Duration) time.Duration {
	if v := os.Getenv(env); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	if inCI() {
		return ci
	}
	return def
}

// startNode starts an in-process chatd node on loopback ports against url.
func startNode(t *testing.T, url string, env map[string]string) *server.Server {
	t.Helper()
	return testnode.Start(t, testnode.SecretEnv(t, url, noLimits, env), slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func newID() string { return uuid.NewString() }

// device describes one MQTT client of a user.
type device struct {
	user     int64
	clientID string
	version  byte // 4 (3.1.1) or 5
	readBuf  int
	local    string // source IP address ("" = any)
}

func (d device) options(t testing.TB) mqtttest.Options {
	o := mqtttest.Options{Version: d.version, ClientID: d.clientID, Username: strconv.FormatInt(d.user, 10),
		Password: testnode.Token(t, d.user), Clean: false, ReadBuffer: d.readBuf, LocalAddr: d.local}
	if d.version == 5 {
		o.Expiry = 3600
	}
	if o.ReadBuffer == 0 {
		o.ReadBuffer = 4096
	}
	return o
}

// connect opens d's persistent session and subscribes to its events.
func (d device) connect(t testing.TB, addr string) (*mqtttest.Client, error) {
	c, _, err := mqtttest.Dial(addr, d.options(t))
	if err != nil {
		return nil, err
	}
	codes, err := c.Subscribe(testnode.EventsTopic(d.user))
	if err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		c.Drop()
		return nil, fmt.Errorf("subscribe events of user %d: %v %v", d.user, codes, err)
	}
	return c, nil
}

// mustConnect is connect retried until deadline (the server may be coming
// back up).
func (d device) mustConnect(t testing.TB, addr string, within time.Duration) *mqtttest.Client {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := d.connect(t, addr)
		if err == nil {
			t.Cleanup(c.Drop)
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect %s (user %d): %v", d.clientID, d.user, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func userProp(props []packets.UserProperty, key string) string {
	for _, p := range props {
		if p.Key == key {
			return p.Val
		}
	}
	return ""
}

func openPool(t testing.TB, url string, conns int32) *pgxpool.Pool {
	t.Helper()
	p, err := pgembed.OpenPool(context.Background(), url, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newService is a chat service straight on the database (no node), for
// setting up conversations and bulk inserts.
func newService(pool *pgxpool.Pool) *chat.Service {
	return chat.NewService(store.New(pool, chat.DefaultLimits()), chat.DefaultLimits())
}

// mustGroup creates a group of user 1 with members on svc.
func mustGroup(t testing.TB, svc *chat.Service, title string, members []int64) chat.Conversation {
	t.Helper()
	g, err := svc.CreateGroup(context.Background(), 1, title, members)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// createGroups creates n groups of user 1 with members, titled prefix and
// their number, and returns their ids.
func createGroups(t testing.TB, svc *chat.Service, n int, prefix string, members []int64) []int64 {
	t.Helper()
	var convs []int64
	for i := 0; i < n; i++ {
		g := mustGroup(t, svc, fmt.Sprint(prefix, i), members)
		convs = append(convs, g.ID)
	}
	return convs
}

var (
	buildOnce sync.Once
	buildErr  error
)

// chatdBinary builds cmd/chatd and the fleet once per test binary (without
// the race detector: chatd is the server under test and the fleet its
// load, not the test) and returns chatd's path.
func chatdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "chatd-faults")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "../../cmd/chatd", "./fleet").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build chatd and the fleet: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "chatd")
}

// proc is chatd running as a subprocess on fixed ports, so it can be
// SIGKILLed and started again on the same addresses.
type proc struct {
	t       testing.TB
	bin     string
	vars    map[string]string // chatd's settings but its addresses
	env     []string
	started bool // once, addresses are fixed: restarts keep them
	MQTT    string
	HTTP    string
	cmd     *exec.Cmd
	exited  chan struct{}
	// startedAt is when the last start began the process.
	startedAt time.Time
	stderrMu  sync.Mutex
	stderr    []string
}

// newProcWithDefaults is newProc with chatd's default limits: none of
// noLimits.
func newProcWithDefaults(t testing.TB, url string, extra map[string]string) *proc {
	p := newProc(t, url, extra)
	for k := range noLimits {
		if _, set := extra[k]; !set {
			delete(p.vars, k)
		}
	}
	p.pickAddrs()
	return p
}

func newProc(t testing.TB, url string, extra map[string]string) *proc {
	p := &proc{t: t, bin: chatdBinary(t)}
	p.vars = map[string]string{
		"CHAT_DATABASE_URL": url, "CHAT_DATA_DIR": t.TempDir(), "CHAT_JWT_SECRET": testnode.Secret, "CHAT_LOG_LEVEL": "error",
	}
	for k, v := range noLimits {
		p.vars[k] = v
	}
	for k, v := range extra {
		p.vars[k] = v
	}
	p.pickAddrs()
	t.Cleanup(p.kill)
	return p
}

// pickAddrs chooses free loopback ports for MQTT and HTTP.
func (p *proc) pickAddrs() {
	p.MQTT, p.HTTP = testkit.FreeAddr(p.t), testkit.FreeAddr(p.t)
	p.env = append(os.Environ(), "CHAT_MQTT_ADDR="+p.MQTT, "CHAT_HTTP_ADDR="+p.HTTP)
	for k, v := range p.vars {
		p.env = append(p.env, k+"="+v)
	}
}

// start runs chatd and waits until it accepts MQTT connections. freeAddr's
// port is free when picked, not when chatd binds it: another process of a
// parallel test run can take it in between. chatd then exits on the bind,
// and the first start tries new ports; a restart keeps its addresses (the
// tests reconnect to them), so it fails.
func (p *proc) start() {
	p.t.Helper()
	for attempt := 1; ; attempt++ {
		err := p.startOnce()
		if err == nil {
			p.started = true
			return
		}
		if p.started || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			p.t.Fatal(err)
		}
		p.t.Logf("chatd start %d: %v; trying other ports", attempt, err)
		p.pickAddrs()
	}
}

// startOnce starts chatd once. It counts chatd as up only when the chatd
// it started has the MQTT port open and answers a CONNECT there: a probe
// alone could reach another process that took the port.
func (p *proc) startOnce() error {
	p.t.Helper()
	p.stderrMu.Lock()
	p.stderr = nil
	p.stderrMu.Unlock()
	cmd := exec.Command(p.bin)
	cmd.Env = p.env
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.startedAt = time.Now()
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			p.stderrMu.Lock()
			if len(p.stderr) < 200 {
				p.stderr = append(p.stderr, sc.Text())
			}
			p.stderrMu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}(p.exited)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			p.cmd = nil
			return fmt.Errorf("chatd exited during start-up:\n%s", p.log())
		default:
		}
		if listening(cmd.Process.Pid, p.MQTT) {
			c, _, err := mqtttest.Dial(p.MQTT, mqtttest.Options{Version: 5, ClientID: "probe-" + newID(), Password: testnode.Token(p.t, 999999), Clean: true, ReadBuffer: 1})
			if err == nil {
				c.Disconnect()
				return nil
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("chatd did not accept MQTT connections on %s within 60s:\n%s", p.MQTT, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listening reports whether process pid holds a listening TCP socket on
// addr's port: the socket's inode, from /proc/net/tcp{,6}, among the
// process's file descriptors.
func listening(pid int, addr string) bool {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return false
	}
	sockets := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			// sl local_address rem_address st ... inode (field 10)
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			if p, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil && p == port {
				sockets["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(sockets) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && sockets[link] {
			return true
		}
	}
	return false
}

// kill sends SIGKILL (no shutdown code runs) and waits for the exit.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

func (p *proc) log() string {
	p.stderrMu.Lock()
	defer p.stderrMu.Unlock()
	return strings.Join(p.stderr, "\n")
}

// rssBytes is the subprocess's resident set size (VmRSS).
func (p *proc) rssBytes() int64 {
	p.t.Helper()
	return vmRSS(p.t, p.cmd.Process.Pid)
}

// samplePeakRSS samples chatd's resident memory every interval, from now
// until the returned stop is called (or the test ends, before the process
// is killed); stop returns the highest sample.
func (p *proc) samplePeakRSS(every time.Duration) (stop func() int64) {
	var peak atomic.Int64
	quit := make(chan struct{})
	done := make(chan struct{})
	pid := p.cmd.Process.Pid // p.cmd is the test goroutine's: kill clears it
	go func() {
		defer close(done)
		for {
			if r := vmRSS(p.t, pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-quit:
				return
			case <-time.After(every):
			}
		}
	}()
	var once sync.Once
	stop = func() int64 {
		once.Do(func() {
			close(quit)
			<-done
		})
		return peak.Load()
	}
	p.t.Cleanup(func() { stop() }) // after kill's cleanup was registered: runs first
	return stop
}

func vmRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
