package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// faultNode is a node with one group of users 1 and 2, a live member 2,
// and a sender that has already sent a few messages.
type faultNode struct {
	srv  *server.Server
	conv int64
	led  *ledger
	app  *app
	s    *sender
}

func newFaultNode(t *testing.T, url, prefix string) *faultNode {
	t.Helper()
	srv := startNode(t, url, map[string]string{"CHAT_SEND_TIMEOUT": "2s"})
	g := mustGroup(t, srv.Service, prefix, []int64{2})
	f := &faultNode{srv: srv, conv: g.ID, led: newLedger(), app: newApp(prefix + ": user 2")}
	keepConnected(t, device{user: 2, clientID: prefix + "-phone-2", version: 5}, f.app, srv.MQTTAddr)
	f.s = newSender(device{user: 1, clientID: prefix + "-sender", version: 5}, srv.MQTTAddr, f.led)
	f.sendN(t, 20, "before")
	return f
}

func (f *faultNode) sendN(t *testing.T, n int, what string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := f.s.send(t, f.conv, newID(), fmt.Sprintf("%s %d", what, i), time.Now().Add(30*time.Second)); err != nil {
			t.Fatalf("send %s %d: %v (%s)", what, i, err, f.s.stats())
		}
	}
}

// probes connects a v5 and a v3.1.1 client of user 1.
func (f *faultNode) probes(t *testing.T, prefix string) (*mqtttest.Client, *mqtttest.Client) {
	v5 := device{user: 1, clientID: prefix + "-probe-5", version: 5}.mustConnect(t, f.srv.MQTTAddr(), 5*time.Second)
	v3 := device{user: 1, clientID: prefix + "-probe-3", version: 4}.mustConnect(t, f.srv.MQTTAddr(), 5*time.Second)
	return v5, v3
}

// waitRefused polls with v5 sends until one is refused (the fault took
// effect) and returns that PUBACK's reason code and string.
func (f *faultNode) waitRefused(t *testing.T, v5 *mqtttest.Client) (byte, string) {
	t.Helper()
	var code byte
	var reason string
	testkit.WaitFor(t, 10*time.Second, "the fault to refuse sends", func() bool {
		id := newID()
		ack, err := v5.Publish(testnode.MsgTopic(f.conv), 1, testnode.SendPayload(id, "probe"))
		if err != nil {
			t.Fatalf("probe send: %v", err)
		}
		if ack.ReasonCode == 0 {
			seq, _ := strconv.ParseInt(userProp(ack.Properties.User, "seq"), 10, 64)
			f.led.ack(id, f.conv, seq)
			return false
		}
		code, reason = ack.ReasonCode, ack.Properties.ReasonString
		return true
	})
	return code, reason
}

// finish sends after recovery and checks the invariants.
func (f *faultNode) finish(t *testing.T, what string, clearedAt time.Time) {
	t.Helper()
	start := time.Now()
	f.sendN(t, 1, "first after "+what)
	recovered := time.Since(clearedAt)
	f.sendN(t, 20, "after "+what)
	pool := openPool(t, f.srv.Settings.DatabaseURL, 1)
	last := checkGapless(t, pool, []int64{f.conv})
	f.led.check(t, pool)
	testkit.WaitFor(t, 15*time.Second, "the member to receive every message", func() bool { return f.app.caughtUp(last) })
	time.Sleep(100 * time.Millisecond)
	f.app.assertExact(t, last)
	t.Logf("%s: sends succeed again %v after the fault was cleared (first send took %v); %d messages acknowledged, all stored once, gapless, delivered once in order; %s",
		what, recovered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), last[f.conv], f.s.stats())
}

func adminExec(t *testing.T, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Cluster(t).URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestReadOnlyDatabaseRefusesSendsAsUnavailableAndRecovers: the cluster
// turns read-only (ALTER SYSTEM SET default_transaction_read_only + reload,
// as a demoted primary or an operator would) under a running node. Sends
// are refused as "unavailable" (v5 0x80 with a reason string, v3.1.1 no
// PUBACK and the connection closed, HTTP 503), history still reads, and
// when it is writable again sends succeed without restarting chatd.
func TestReadOnlyDatabaseRefusesSendsAsUnavailableAndRecovers(t *testing.T) {
	url := pgtest.NewDB(t)
	f := newFaultNode(t, url, "ro")
	v5, v3 := f.probes(t, "ro")
	t.Cleanup(func() {
		adminExec(t, `ALTER SYSTEM RESET default_transaction_read_only`)
		adminExec(t, `SELECT pg_reload_conf()`)
	})
	adminExec(t, `ALTER SYSTEM SET default_transaction_read_only = on`)
	adminExec(t, `SELECT pg_reload_conf()`)
	code, reason := f.waitRefused(t, v5)
	t.Logf("read-only database: first refused send got PUBACK 0x%02x %q", code, reason)
	assertSendRefusedAsUnavailable(t, "read-only database", v5, v3, f.srv.HTTPAddr(), f.conv)
	status := httpGet(t, f.srv.HTTPAddr(), 2, fmt.Sprintf("/v1/conversations/%d/messages?afterSeq=0", f.conv))
	if status != http.StatusOK {
		t.Errorf("history while the database is read-only: %d, want 200", status)
	}
	adminExec(t, `ALTER SYSTEM RESET default_transaction_read_only`)
	adminExec(t, `SELECT pg_reload_conf()`)
	f.finish(t, "read-only database", time.Now())
}

func httpGet(t *testing.T, httpAddr string, user int64, path string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+path, nil)
	req.Header.Set("Authorization", "Bearer "+testnode.Token(t, user))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDiskFullRefusesSendsAsUnavailableAndRecovers: PostgreSQL reports
// SQLSTATE 53100 (disk_full). With a real full disk where this machine
// allows mounting a tmpfs (the message table moved to a tablespace on a
// tiny tmpfs that a filler file then fills), otherwise with the same
// SQLSTATE raised by a trigger. Either way sends are refused as
// "unavailable" and succeed again once space is freed.
func TestDiskFullRefusesSendsAsUnavailableAndRecovers(t *testing.T) {
	t.Run("SQLSTATE 53100 raised on insert", func(t *testing.T) {
		url := pgtest.NewDB(t)
		f := newFaultNode(t, url, "dfx")
		v5, v3 := f.probes(t, "dfx")
		pool := openPool(t, url, 1)
		ctx := context.Background()
		if _, err := pool.Exec(ctx, `CREATE FUNCTION faults_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
			CREATE TRIGGER faults_disk_full BEFORE INSERT ON message FOR EACH ROW EXECUTE FUNCTION faults_disk_full()`); err != nil {
			t.Fatal(err)
		}
		code, reason := f.waitRefused(t, v5)
		t.Logf("disk_full raised: first refused send got PUBACK 0x%02x %q", code, reason)
		assertSendRefusedAsUnavailable(t, "disk full (SQLSTATE 53100)", v5, v3, f.srv.HTTPAddr(), f.conv)
		if _, err := pool.Exec(ctx, `DROP TRIGGER faults_disk_full ON message`); err != nil {
			t.Fatal(err)
		}
		f.finish(t, "disk full (SQLSTATE 53100)", time.Now())
	})
	t.Run("tablespace on a full tmpfs", func(t *testing.T) {
		// PostgreSQL (running as postgres when the tests run as root) must
		// reach the mount point: not under t.TempDir, which is 0700.
		dir, err := os.MkdirTemp("", "faults-ts")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		mnt := filepath.Join(dir, "ts")
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here (%v: %s); the SQLSTATE 53100 subtest covers the mapping", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
		if os.Geteuid() == 0 {
			pg, err := user.Lookup("postgres")
			if err != nil {
				t.Skipf("no postgres account to own the tablespace: %v", err)
			}
			uid, _ := strconv.Atoi(pg.Uid)
			gid, _ := strconv.Atoi(pg.Gid)
			if err := os.Chown(mnt, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		url := pgtest.NewDB(t)
		pool := openPool(t, url, 1)
		ctx := context.Background()
		var db string
		if err := pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
			t.Fatal(err)
		}
		ts := "faults_" + db
		adminExec(t, `CREATE TABLESPACE `+ts+` LOCATION '`+mnt+`'`)
		t.Cleanup(func() {
			_, _ = pool.Exec(ctx, `ALTER TABLE message SET TABLESPACE pg_default`)
			pool.Close()
			adminExec(t, `DROP TABLESPACE IF EXISTS `+ts)
		})
		if _, err := pool.Exec(ctx, `ALTER TABLE message SET TABLESPACE `+ts); err != nil {
			t.Fatal(err)
		}
		f := newFaultNode(t, url, "dft")
		v5, v3 := f.probes(t, "dft")
		filler := filepath.Join(mnt, "filler")
		fillDisk(t, filler)
		code, reason := f.waitRefused(t, v5)
		t.Logf("tmpfs full: first refused send got PUBACK 0x%02x %q (after %d messages fit in the pages already allocated)", code, reason, f.led.count())
		assertSendRefusedAsUnavailable(t, "disk full (tmpfs)", v5, v3, f.srv.HTTPAddr(), f.conv)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		f.finish(t, "disk full (tmpfs)", time.Now())
	})
}

// fillDisk writes path until the file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// Whatever is left is smaller than 64 KiB: take it byte-wise.
	for {
		if _, err := fh.Write(buf[:512]); err != nil {
			break
		}
	}
}
