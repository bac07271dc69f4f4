package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// httpSend posts one message over the HTTP API and returns the status and
// the error code of the body ("" on success).
func httpSend(t *testing.T, httpAddr string, user, conv int64, id, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/conversations/%d/messages", httpAddr, conv),
		bytes.NewReader(testnode.SendPayload(id, body)))
	req.Header.Set("Authorization", "Bearer "+testnode.Token(t, user))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("HTTP send: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// assertSendRefusedAsUnavailable checks the documented outcome of a send
// while the database cannot commit: v5 PUBACK 0x80 with a reason string;
// v3.1.1 no PUBACK and the connection closed; HTTP 503 "unavailable".
func assertSendRefusedAsUnavailable(t *testing.T, what string, v5, v3 *mqtttest.Client, httpAddr string, conv int64) {
	t.Helper()
	ack, err := v5.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(newID(), "while "+what))
	if err != nil {
		t.Errorf("%s: v5 send: %v, want PUBACK 0x80", what, err)
	} else if ack.ReasonCode != 0x80 || ack.Properties.ReasonString == "" {
		t.Errorf("%s: v5 send got PUBACK 0x%02x %q, want 0x80 with a reason string", what, ack.ReasonCode, ack.Properties.ReasonString)
	} else {
		t.Logf("%s: v5 PUBACK 0x80 %q", what, ack.Properties.ReasonString)
	}
	if _, err := v3.Publish(testnode.MsgTopic(conv), 1, testnode.SendPayload(newID(), "while "+what)); !errors.Is(err, mqtttest.ErrNoAck) {
		t.Errorf("%s: v3.1.1 send: %v, want no PUBACK and the connection closed", what, err)
	}
	testkit.WaitFor(t, 5*time.Second, what+": the v3.1.1 connection to be closed", v3.Closed)
	status, code := httpSend(t, httpAddr, 1, conv, newID(), "while "+what)
	if status != http.StatusServiceUnavailable || code != "unavailable" {
		t.Errorf("%s: HTTP send got %d %q, want 503 unavailable", what, status, code)
	}
}

// TestPostgresOutageRefusesSendsWithDocumentedCodesAndRecoversByItself:
// PostgreSQL is stopped immediately (pg_ctl stop -m immediate) under load
// for FAULTS_PG_OUTAGE (10 s). Meanwhile sends fail with the documented
// codes for both MQTT versions and HTTP, connects are refused as
// "unavailable", nothing uncommitted is acknowledged; when PostgreSQL is
// back, sends and deliveries resume without restarting chatd.
func TestPostgresOutageRefusesSendsWithDocumentedCodesAndRecoversByItself(t *testing.T) {
	outage := knob("FAULTS_PG_OUTAGE", 10*time.Second, 10*time.Second)
	url := pgtest.NewDB(t)
	// The test cluster runs with synchronous_commit=off for speed, which
	// loses the last commits in a crash: exactly what "acked means
	// committed" rules out. Production runs with the default (on).
	durable(t, url)
	cluster := pgtest.Cluster(t)
	t.Cleanup(func() { _ = cluster.Start(context.Background()) }) // whatever happens, the next test has a database
	srv := startNode(t, url, map[string]string{"CHAT_SEND_TIMEOUT": "2s"})
	pool := openPool(t, url, 4)
	ctx := context.Background()
	convs := createGroups(t, srv.Service, 2, "outage ", []int64{2, 3, 4})
	addr := srv.MQTTAddr
	apps, away := outageAudience(t, "pg-phone-", "away during the outage", addr)

	led := newLedger()
	senders := mixedSenders("pg", addr, led, 1, 2)
	var stop atomic.Bool
	var acks atomic.Int64
	var wg sync.WaitGroup
	for i, s := range senders {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				if _, err := s.send(t, convs[n%len(convs)], newID(), fmt.Sprintf("load %d/%d", i, n), time.Now().Add(outage+60*time.Second)); err != nil {
					t.Errorf("%s: %v", s.dev.clientID, err)
					return
				}
				acks.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	testkit.WaitFor(t, 30*time.Second, "load before the outage", func() bool { return acks.Load() >= 60 })

	// Probes connected before the outage.
	v5 := device{user: 1, clientID: "pg-probe-5", version: 5}.mustConnect(t, addr(), 5*time.Second)
	v3 := device{user: 1, clientID: "pg-probe-3", version: 4}.mustConnect(t, addr(), 5*time.Second)
	before := snapshotMarks(t, pool)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := cluster.Stop(sctx, true); err != nil {
		t.Fatalf("stop PostgreSQL: %v", err)
	}
	cancel()
	downAt := time.Now()
	acksAtStop := acks.Load()
	assertSendRefusedAsUnavailable(t, "PostgreSQL down", v5, v3, srv.HTTPAddr(), convs[0])
	if ack, err := v5.Publish(testnode.ReadTopic(convs[0]), 1, []byte(`{"seq":1}`)); err != nil || ack.ReasonCode != 0x80 {
		t.Errorf("read receipt while PostgreSQL is down: 0x%02x %v, want 0x80", ack.ReasonCode, err)
	}
	for _, v := range []byte{5, 4} {
		want := byte(0x88)
		if v == 4 {
			want = 0x03
		}
		_, ack, err := mqtttest.Dial(addr(), device{user: 1, clientID: fmt.Sprintf("pg-new-%d", v), version: v}.options(t))
		if err == nil || ack.ReasonCode != want {
			t.Errorf("v%d CONNECT while PostgreSQL is down: CONNACK 0x%02x (%v), want 0x%02x", v, ack.ReasonCode, err, want)
		}
	}
	time.Sleep(time.Until(downAt.Add(outage))) // the outage itself: load keeps retrying meanwhile
	acksDuringOutage := acks.Load() - acksAtStop

	if err := cluster.Start(ctx); err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	upAt := time.Now()
	downFor := upAt.Sub(downAt)
	probe := newSender(device{user: 1, clientID: "pg-probe-after", version: 5}, addr, led)
	if _, err := probe.send(t, convs[1], newID(), "probe after the outage", time.Now().Add(30*time.Second)); err != nil {
		t.Fatalf("no send succeeded within 30s after PostgreSQL came back: %v (%s)", err, probe.stats())
	}
	resumedIn := time.Since(upAt)
	acksAtUp := acks.Load()
	testkit.WaitFor(t, 30*time.Second, "load to continue after the outage", func() bool { return acks.Load() >= acksAtUp+60 })
	stop.Store(true)
	wg.Wait()

	last := checkGapless(t, pool, convs)
	led.check(t, pool)
	everyAppReceivesExactly(t, apps, away, addr, last, 30*time.Second)
	before.notBehind(t, snapshotMarks(t, pool))

	t.Logf("PostgreSQL down for %v (immediate stop); %d sends acknowledged before, %d while it was down (all committed: see the ledger check), %d after; a send succeeds again %v after PostgreSQL is back, without restarting chatd",
		downFor.Round(time.Millisecond), acksAtStop, acksDuringOutage, acks.Load()-acksAtUp, resumedIn.Round(time.Millisecond))
	for _, s := range senders {
		t.Log(s.stats())
	}
	for u := int64(2); u <= 4; u++ {
		t.Logf("%s: %d messages in order, %d duplicates dropped", apps[u].name, apps[u].total, apps[u].dups)
	}
}

// durable turns synchronous_commit back on for url's database, so that a
// commit (and so a PUBACK) survives an immediate PostgreSQL stop.
func durable(t *testing.T, url string) {
	t.Helper()
	admin := openPool(t, url, 1)
	var db string
	if err := admin.QueryRow(context.Background(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), `ALTER DATABASE "`+db+`" SET synchronous_commit = on`); err != nil {
		t.Fatal(err)
	}
	admin.Close()
}
