//go:build unix

package faults_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/procstate"
	"github.com/chatd/chatd/internal/testkit"
)

// embeddedDataDir is a data dir for chatd's embedded PostgreSQL that the
// unprivileged account PostgreSQL runs as (when the test runs as root) can
// reach.
func embeddedDataDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "faults-embedded")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "data")
}

// postmasterPID is the pid postmaster.pid records (0 when there is none).
func postmasterPID(dataDir string) int {
	raw, err := os.ReadFile(filepath.Join(pgembed.PGDir(dataDir), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, err := pgembed.ParsePostmasterPID(string(raw))
	if err != nil {
		return 0
	}
	return pm.PID
}

// stop shuts chatd down gracefully (SIGTERM), so that its embedded
// PostgreSQL stops before the test removes the data dir.
func (p *proc) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// A supervisor (systemd Restart=always, a container runtime) restarts chatd
// the moment it dies. After kill -9 of chatd and of every process of its
// embedded PostgreSQL, the old postmaster is a zombie until init reaps it:
// chatd took it for a running server, waited 30 s for it to answer and
// exited. Twenty times, under send load: SIGKILL all of it, start chatd
// again at once on the same data dir, so that it meets the old postmaster
// before init reaps it; every restart is ready within 15 s and every
// acknowledged message is stored once, gapless.
func TestChatdAndItsPostgresKilledAndRestartedAtOnceComeBackEveryTimeWithEveryAckedMessage(t *testing.T) {
	const restarts = 20
	const readyWithin = 15 * time.Second
	dataDir := embeddedDataDir(t)
	// Info: chatd logs that it waits for the old postmaster.
	p := newProc(t, "", map[string]string{"CHAT_DATA_DIR": dataDir, "CHAT_MAX_INFLIGHT": "16", "CHAT_LOG_LEVEL": "info"})
	p.start()
	t.Cleanup(p.stop)
	addr := func() string { return p.MQTT }

	ctx := context.Background()
	pool, closeDB, err := pgembed.Open(ctx, "", dataDir, 2, nil) // joins chatd's PostgreSQL
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(pool)
	convs := createGroups(t, svc, 3, "restart ", []int64{2, 3, 4})
	_ = closeDB(ctx)

	led := newLedger()
	var sent atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	senders := mixedSenders("restart", addr, led, 1, 2, 3)
	sendLoad(t, &wg, senders, convs, 6, 60*time.Second, &sent, func(int) bool { return !stop.Load() })

	var ready, gaps []time.Duration
	zombies, met := 0, 0
	for r := 0; r < restarts; r++ {
		from := sent.Load()
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("acknowledged sends before kill %d", r+1), func() bool { return sent.Load() >= from+5 })
		pm := postmasterPID(dataDir)
		if pm == 0 {
			t.Fatalf("kill %d: no postmaster.pid", r+1)
		}
		// Every process of the data dir: the postmaster's process group
		// (it and its backends), then chatd.
		if err := syscall.Kill(-pm, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the postmaster's group %d: %v", pm, err)
		}
		p.kill()
		killedAt := time.Now()
		if st, _ := procstate.Of(pm); st == procstate.Zombie {
			zombies++
		}
		if err := p.startOnce(); err != nil { // starts the process at once, then waits for MQTT
			t.Fatalf("restart %d: %v", r+1, err)
		}
		gaps = append(gaps, p.startedAt.Sub(killedAt))
		if log := p.log(); strings.Contains(log, "previous start to be reaped") || strings.Contains(log, "left running on this data dir") {
			met++
		}
		took := time.Since(killedAt)
		ready = append(ready, took)
		if took > readyWithin {
			t.Errorf("restart %d ready %v after the kill, bound %v", r+1, took.Round(time.Millisecond), readyWithin)
		}
	}
	stop.Store(true)
	wg.Wait()

	pool, closeDB, err = pgembed.Open(ctx, "", dataDir, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(ctx)
	checkGapless(t, pool, convs)
	led.check(t, pool)

	minR, maxR, sum := ready[0], ready[0], time.Duration(0)
	for _, d := range ready {
		minR, maxR, sum = min(minR, d), max(maxR, d), sum+d
	}
	t.Logf("%d kills of chatd and its PostgreSQL under load; the old postmaster was still a zombie right after %d of the kills; the restarted chatd found it still there (and waited for it) at %d; chatd started %v–%v after each kill; ready after %v–%v (mean %v); %d messages acknowledged, all stored once, gapless in %d conversations",
		restarts, zombies, met, slicesMin(gaps).Round(time.Microsecond), slicesMax(gaps).Round(time.Microsecond),
		minR.Round(time.Millisecond), maxR.Round(time.Millisecond), (sum / restarts).Round(time.Millisecond), led.count(), len(convs))
	for _, s := range senders {
		t.Log(s.stats())
	}
	// The scenario is a restart that meets the old postmaster before init
	// has reaped it (~2 s here). How fast the harness forks and execs
	// chatd depends on the machine's load (0.4 ms to 71 ms seen), so the
	// test asks chatd what it met: its start-up logs the wait.
	if met < restarts/2 {
		t.Errorf("the restarted chatd met the old postmaster at %d of %d restarts; the scenario is a restart before it is reaped", met, restarts)
	}
}

func slicesMin(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func slicesMax(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// A second chatd on a data dir another live chatd serves used to attach to
// the first one's embedded PostgreSQL and serve 503s once the first
// stopped. It is refused at start-up, saying why and what to do, and the
// first keeps serving. Nodes that share an external database
// (CHAT_DATABASE_URL) may share a data dir.
func TestSecondChatdOnADataDirAnotherChatdServesIsRefused(t *testing.T) {
	dataDir := embeddedDataDir(t)
	first := newProc(t, "", map[string]string{"CHAT_DATA_DIR": dataDir})
	first.start()
	t.Cleanup(first.stop)

	second := newProc(t, "", map[string]string{"CHAT_DATA_DIR": dataDir})
	err := second.startOnce()
	if err == nil {
		t.Fatalf("a second chatd started on the data dir another chatd serves (it joined the first one's PostgreSQL)")
	}
	for _, want := range []string{"data dir in use", fmt.Sprintf("pid %d", first.cmd.Process.Pid), "CHAT_DATA_DIR", "CHAT_DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second chatd's error does not say %q:\n%v", want, err)
		}
	}
	device{user: 1, clientID: "first-still-serves", version: 5}.mustConnect(t, first.MQTT, 5*time.Second)

	external := newProc(t, pgtest.NewDB(t), map[string]string{"CHAT_DATA_DIR": dataDir})
	external.start()
	device{user: 1, clientID: "external-serves", version: 5}.mustConnect(t, external.MQTT, 5*time.Second)
}
