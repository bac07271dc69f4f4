// Package faults_test is the fault suite of issue 9: every scenario runs a
// real chatd against a real PostgreSQL, drives load, injects one fault and
// checks the invariants at the end (see invariants_test.go and
// docs/faults.md). The tests stop and restart this binary's PostgreSQL
// cluster, so they never run in parallel with each other, and the package
// has its own cluster (TestMain) so no other package is disturbed.
package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/auth"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
	"github.com/chatd/chatd/store"
)

var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

const testSecret = "test-secret-0123456789abcdef0123456789"

// noLimits turns every rate limit off: these tests are about faults, not
// about limits.
var noLimits = map[string]string{
	"CHAT_LIMIT_SEND_RATE":    "0",
	"CHAT_LIMIT_CONV_RATE":    "0",
	"CHAT_LIMIT_CONNECT_RATE": "0",
	"CHAT_LIMIT_API_RATE":     "0",
	"CHAT_LIMIT_READ_RATE":    "0",
	"CHAT_LIMIT_TYPING_RATE":  "0",
	"CHAT_PRESENCE_PUSH":      "false",
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
	base := testnode.Env(t, url)
	base["CHAT_JWT_SECRET"] = testSecret
	base["CHAT_SHUTDOWN_TIMEOUT"] = "10s"
	for k, v := range noLimits {
		base[k] = v
	}
	for k, v := range env {
		base[k] = v
	}
	return testnode.Start(t, base, slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func token(t testing.TB, user int64) string {
	t.Helper()
	tok, err := auth.Mint([]byte(testSecret), user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newID() string { return uuid.NewString() }

func sendPayload(clientMsgID, body string) []byte {
	b, _ := json.Marshal(map[string]string{"clientMsgId": clientMsgID, "body": body})
	return b
}

func msgTopic(conv int64) string  { return fmt.Sprintf("chat/v1/conv/%d/msg", conv) }
func readTopic(conv int64) string { return fmt.Sprintf("chat/v1/conv/%d/read", conv) }
func eventsTopic(u int64) string  { return fmt.Sprintf("chat/v1/user/%d/events", u) }

// device describes one MQTT client of a user.
type device struct {
	user     int64
	clientID string
	version  byte // 4 (3.1.1) or 5
	readBuf  int
}

func (d device) options(t testing.TB) mqtttest.Options {
	o := mqtttest.Options{Version: d.version, ClientID: d.clientID, Username: strconv.FormatInt(d.user, 10),
		Password: token(t, d.user), Clean: false, ReadBuffer: d.readBuf}
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
	codes, err := c.Subscribe(eventsTopic(d.user))
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

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func openPool(t testing.TB, url string, conns int32) *pgxpool.Pool {
	t.Helper()
	p, err := store.OpenPool(context.Background(), url, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newService is a chat service straight on the database (no node), for
// setting up conversations and bulk inserts.
func newService(pool *pgxpool.Pool) *chat.Service {
	return chat.NewService(store.New(pool, chat.DefaultLimits()), nil, chat.DefaultLimits())
}

var (
	buildOnce sync.Once
	buildErr  error
)

// chatdBinary builds cmd/chatd once per test binary (without the race
// detector: the subprocess is the server under test, not the test).
func chatdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "chatd-faults")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "chatd"), "../../cmd/chatd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build chatd: %v\n%s", err, out)
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
	t        testing.TB
	bin      string
	env      []string
	MQTT     string
	HTTP     string
	cmd      *exec.Cmd
	exited   chan struct{}
	stderrMu sync.Mutex
	stderr   []string
}

func newProc(t testing.TB, url string, extra map[string]string) *proc {
	p := &proc{t: t, bin: chatdBinary(t), MQTT: freeAddr(t), HTTP: freeAddr(t)}
	env := map[string]string{
		"CHAT_DATABASE_URL": url, "CHAT_MQTT_ADDR": p.MQTT, "CHAT_HTTP_ADDR": p.HTTP,
		"CHAT_DATA_DIR": t.TempDir(), "CHAT_JWT_SECRET": testSecret, "CHAT_LOG_LEVEL": "error",
	}
	for k, v := range noLimits {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	p.env = os.Environ()
	for k, v := range env {
		p.env = append(p.env, k+"="+v)
	}
	t.Cleanup(p.kill)
	return p
}

// start runs chatd and waits until it accepts MQTT connections.
func (p *proc) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin)
	cmd.Env = p.env
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
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
	waitFor(p.t, 60*time.Second, "chatd to accept MQTT connections", func() bool {
		select {
		case <-p.exited:
			p.t.Fatalf("chatd exited during start-up:\n%s", p.log())
		default:
		}
		c, _, err := mqtttest.Dial(p.MQTT, mqtttest.Options{Version: 5, ClientID: "probe-" + newID(), Password: token(p.t, 999999), Clean: true, ReadBuffer: 1})
		if err == nil {
			c.Disconnect()
		}
		return err == nil
	})
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
