package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/testkit"
)

// These tests need Node.js (and, for the browser, Debian's chromium). On
// a developer machine without them they skip loudly; under CI (env CI
// non-empty) a missing tool is a failure, so a green CI run always means
// the browser tests ran. .ci/run installs everything.

// requireTool returns the path of a tool, or skips (no CI) or fails (CI).
func requireTool(t *testing.T, what string, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if strings.ContainsRune(c, os.PathSeparator) {
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return c
			}
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("%s not found (looked for %s)", what, strings.Join(candidates, ", "))
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI is set, so the web client's tests must run: install it (.ci/run does)", msg)
	}
	t.Skipf("\n\n"+
		"************************************************************************\n"+
		"*  SKIPPING %s: %s\n"+
		"*  The web client is NOT tested. Install it (see .ci/run), e.g.\n"+
		"*    apt-get install -y chromium nodejs npm\n"+
		"************************************************************************\n", t.Name(), msg)
	return ""
}

func requireNode(t *testing.T) string {
	return requireTool(t, "Node.js", os.Getenv("NODE"), "node", "nodejs")
}

var npmOnce sync.Mutex

// ensureNodeModules runs `npm ci` in web/ when node_modules is missing.
func ensureNodeModules(t *testing.T) {
	t.Helper()
	npmOnce.Lock()
	defer npmOnce.Unlock()
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err == nil {
		return
	}
	npm := requireTool(t, "npm", "npm")
	t.Log("web/node_modules is missing: running npm ci")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1") // never fetch a browser
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in web/: %v\n%s", err, out)
	}
}

// TestClientStateUnit runs the Node unit tests of the client's ordering
// rules (web/test/*.test.mjs): gaps, duplicates, pending sends, unread.
//
// Node runs the files side by side (its default is one fewer than the
// cores: one at a time on two), since most of their time is spent in
// the timers of reconnection and retry scenarios, not on the CPU.
func TestClientStateUnit(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=8", "--test-reporter=spec", "test/")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test web/test/:\n%s", out)
	if err != nil {
		t.Fatalf("client unit tests failed: %v", err)
	}
}

// TestBundleUpToDate rebuilds static/app.js and static/sw.js from src/
// into a temp directory and compares: the committed bundles must be what
// web/build.sh makes.
func TestBundleUpToDate(t *testing.T) {
	requireNode(t)
	ensureNodeModules(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "bash", "build.sh", out).CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"app.js", "sw.js"} {
		fresh, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := staticFS.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("web/static/%s (%d bytes) is not the build of web/src (%d bytes): run web/build.sh and commit the result", name, len(committed), len(fresh))
		}
	}
}

// TestBrowserE2E runs web/e2e/*.spec.mjs but those with a test of their own
// (e2eSpecsAtOnce at a time, in name order) in headless Chromium against a
// chatd it starts itself: dev mode, embedded PostgreSQL, loopback ports. It
// also takes the README's screenshots (screenshotDir says where they go).
// The specs share the chatd, side by side, so each uses user ids of its own
// and none changes what the others see of chatd (its network, its
// settings).
func TestBrowserE2E(t *testing.T) {
	t.Parallel()
	chromium, node := browserTools(t)

	base := startChatd(t, buildChatd(t))

	shots := screenshotDir(t)
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	specs, err := filepath.Glob(filepath.Join("e2e", "*.spec.mjs"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("no e2e/*.spec.mjs (%v)", err)
	}
	sort.Strings(specs)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	slots := make(chan struct{}, e2eSpecsAtOnce)
	for _, spec := range specs {
		if ownTest[filepath.Base(spec)] {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := runSpec(ctx, t, node, spec, "e2e "+filepath.Base(spec)+": ", "CHATD_URL="+base, "CHROMIUM_PATH="+chromium, "SCREENSHOT_DIR="+shots); err != nil {
				t.Errorf("browser tests of %s failed: %v", spec, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	wantScreenshots(t, shots, "inbox.png", "conversation.png", "phone.png", "lifecycle.png", "attachments.png")
}

// e2eSpecsAtOnce is how many of TestBrowserE2E's specs run at a time, each
// with a browser of its own: they mostly wait (on chatd, on timers), so
// three keep two cores busy without starving the browsers.
const e2eSpecsAtOnce = 3

// browserTools finds Chromium and Node and installs the e2e specs'
// dependencies; it skips the test without them and under -short.
func browserTools(t *testing.T) (chromium, node string) {
	t.Helper()
	chromium = requireTool(t, "Chromium", os.Getenv("CHROMIUM_PATH"), "/usr/bin/chromium", "chromium")
	node = requireNode(t)
	ensureNodeModules(t)
	if testing.Short() {
		t.Skip("-short: not starting chatd and a browser")
	}
	return chromium, node
}

// screenshotDir is where the specs write the README's screenshots: a
// temporary directory, so that running the tests leaves the checkout as it
// was, or docs/images/ with CHAT_UPDATE_SCREENSHOTS=1, to refresh the
// README's pictures after a change to the client.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("CHAT_UPDATE_SCREENSHOTS") != "1" {
		return t.TempDir()
	}
	shots, err := filepath.Abs(filepath.Join("..", "docs", "images"))
	if err != nil {
		t.Fatal(err)
	}
	return shots
}

// runSpec runs one e2e spec with node, its environment env on top of the
// process's (never downloading a browser), its output logged line by line
// behind prefix.
func runSpec(ctx context.Context, t *testing.T, node, spec, prefix string, env ...string) error {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, "--test-reporter=spec", spec)
	cmd.Env = append(append(os.Environ(), env...), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	cmd.WaitDelay = 10 * time.Second
	w := &lineLogger{t: t, prefix: prefix}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	w.Flush()
	return err
}

// runOwnBrowserSpec runs e2e/spec in headless Chromium against a chatd of
// its own, which it starts (chatdEnv on top of startChatd's):
// for a spec that does to chatd's network what the others sharing
// TestBrowserE2E's chatd must not see, or needs settings of its own.
func runOwnBrowserSpec(t *testing.T, spec string, chatdEnv ...string) {
	t.Helper()
	chromium, node := browserTools(t)
	base := startChatd(t, buildChatd(t), chatdEnv...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := runSpec(ctx, t, node, filepath.Join("e2e", spec), "e2e "+spec+": ", "CHATD_URL="+base, "CHROMIUM_PATH="+chromium); err != nil {
		t.Fatalf("browser test %s failed: %v", spec, err)
	}
}

// wantScreenshots checks that the specs wrote files into shots.
func wantScreenshots(t *testing.T, shots string, files ...string) {
	t.Helper()
	for _, f := range files {
		if fi, err := os.Stat(filepath.Join(shots, f)); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s not written: %v", f, err)
		}
	}
}

// chatdBuild is the chatd binary the tests share: built by the first test
// that needs it, into a directory TestMain removes once the tests are done.
var chatdBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// TestMain removes the chatd binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if chatdBuild.dir != "" {
		_ = os.RemoveAll(chatdBuild.dir)
	}
	os.Exit(code)
}

// buildChatd compiles ./cmd/chatd once per test binary and returns its path.
func buildChatd(t *testing.T) string {
	t.Helper()
	chatdBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "chatd-web-bin-")
		if err != nil {
			chatdBuild.err = err
			return
		}
		chatdBuild.dir = dir
		bin := filepath.Join(dir, "chatd")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/chatd/chatd/cmd/chatd")
		if out, err := cmd.CombinedOutput(); err != nil {
			chatdBuild.err = fmt.Errorf("go build ./cmd/chatd: %w\n%s", err, out)
			return
		}
		chatdBuild.bin = bin
	})
	if chatdBuild.err != nil {
		t.Fatal(chatdBuild.err)
	}
	return chatdBuild.bin
}

// startChatd runs chatd in dev mode on free loopback ports with a fresh
// embedded PostgreSQL and returns its base URL once /readyz answers. Its
// log goes to a file, echoed on failure; warnings and errors are always
// reported, since a clean browser run can still hide a server-side error.
func startChatd(t *testing.T, bin string, extraEnv ...string) string {
	t.Helper()
	base, _ := startChatdDB(t, bin, extraEnv...)
	return base
}

// startChatdDB is startChatd that also answers the connection string of
// chatd's embedded database, for a test that reads its state on failure
// (valid until the test's clean-up stops chatd).
func startChatdDB(t *testing.T, bin string, extraEnv ...string) (base, dbURL string) {
	t.Helper()
	// Under /tmp and world-traversable: PostgreSQL runs as an unprivileged
	// account when the tests run as root, and must reach its data dir.
	dataDir, err := os.MkdirTemp("/tmp", "chatd-web-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "chatd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	httpAddr, mqttAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)

	cmd := exec.Command(bin)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHAT_") { // a developer's CHAT_DATABASE_URL must not leak in
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"CHAT_DATA_DIR="+dataDir,
		"CHAT_HTTP_ADDR="+httpAddr,
		"CHAT_MQTT_ADDR="+mqttAddr,
		"CHAT_DEV=true",
		"CHAT_LIMIT_SEND_RATE=0",
		"CHAT_SHUTDOWN_TIMEOUT=10s",
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("chatd did not stop cleanly: %v", err)
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("chatd did not stop within 40s of SIGINT")
		}
		logf.Close()
		reportLog(t, logPath)
		if err := os.RemoveAll(dataDir); err != nil {
			t.Logf("remove %s: %v", dataDir, err)
		}
	})

	base = "http://" + httpAddr
	dbURL = fmt.Sprintf("host=%s port=5432 user=postgres dbname=%s sslmode=disable", filepath.Join(dataDir, "pg"), pgembed.Database)
	deadline := time.Now().Add(2 * time.Minute) // initdb on a slow machine
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("chatd exited during start-up: %v\n%s", err, tail(logPath, 40))
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, dbURL
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("chatd not ready after 2 minutes\n%s", tail(logPath, 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reportLog logs chatd's WARN and ERROR lines (the dev-mode banner aside),
// and the whole tail when the test failed.
func reportLog(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var notable []string
	for _, line := range strings.Split(string(b), "\n") {
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "panic")) &&
			!strings.Contains(line, "DEVELOPMENT MODE") {
			notable = append(notable, line)
		}
	}
	if len(notable) > 0 {
		t.Logf("chatd logged %d warnings/errors during the browser tests:\n%s", len(notable), strings.Join(notable, "\n"))
	}
	if t.Failed() {
		t.Logf("chatd log (tail):\n%s", tail(path, 60))
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lineLogger streams a child's output into the test log line by line, so
// `go test -v` shows the browser tests as they run.
type lineLogger struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(l.prefix + string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(l.prefix + string(l.buf))
		l.buf = nil
	}
}

var _ io.Writer = (*lineLogger)(nil)
