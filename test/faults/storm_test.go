package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
)

// metricValue reads one unlabelled metric from chatd's /metrics.
func metricValue(t *testing.T, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// stormClient is one of the storm's devices with what it has received.
type stormClient struct {
	dev  device
	conv int64
	c    *mqtttest.Client
	have int64
	dups int
	bad  string
}

// describe says what a client that lacks a message is like, for the
// failure that names it.
func (sc *stormClient) describe() string {
	state := "connected"
	select {
	case <-sc.c.Done:
		state = fmt.Sprintf("disconnected: %v", sc.c.Err)
	default:
	}
	return fmt.Sprintf("%s (v%d, conv %d, have seq %d, %d dups, %s, %d publishes unread)",
		sc.dev.clientID, sc.dev.version, sc.conv, sc.have, sc.dups, state, len(sc.c.Publishes))
}

// drain handles what arrived so far without blocking.
func (sc *stormClient) drain() {
	for {
		select {
		case pk, ok := <-sc.c.Publishes:
			if !ok {
				return
			}
			var ev wireEvent
			if json.Unmarshal(pk.Payload, &ev) != nil || ev.Type != chat.EventMessageNew || ev.ConversationID != sc.conv {
				continue
			}
			switch {
			case ev.Seq <= sc.have:
				sc.dups++
			case ev.Seq == sc.have+1:
				sc.have = ev.Seq
			default:
				sc.bad = fmt.Sprintf("seq %d after %d", ev.Seq, sc.have)
				sc.have = ev.Seq
			}
		default:
			return
		}
	}
}

// stormGroups creates the storms' groups: users 1..clients in groups of
// groupSize consecutive users, each group's first user its owner, named
// prefix and the group's index. It calls add for every user with its
// group and its MQTT version, odd users 3.1.1 and even ones 5, so that
// both protocol versions reconnect together; it returns the groups in
// order.
func stormGroups(t *testing.T, svc *chat.Service, prefix string, clients, groupSize int, add func(u, conv int64, version byte)) []int64 {
	t.Helper()
	var convs []int64
	for g := 0; g < clients/groupSize; g++ {
		owner := int64(g*groupSize + 1)
		var members []int64
		for u := owner + 1; u < owner+int64(groupSize); u++ {
			members = append(members, u)
		}
		conv, err := svc.CreateGroup(context.Background(), owner, fmt.Sprint(prefix, g), members)
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, conv.ID)
		for i := 0; i < groupSize; i++ {
			u := owner + int64(i)
			v := byte(5)
			if u%2 == 1 {
				v = 4
			}
			add(u, conv.ID, v)
		}
	}
	return convs
}

// sendToGroups sends body over HTTP from every group's owner (as
// stormGroups made them), eight senders at a time so that a round is
// sent quickly without one connection per group.
func sendToGroups(t *testing.T, httpAddr string, convs []int64, groupSize int, body string) {
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for g := range work {
				if status, code := httpSend(t, httpAddr, int64(g*groupSize+1), convs[g], newID(), body); status/100 != 2 {
					t.Errorf("HTTP send to group %d: %d %s", g, status, code)
				}
			}
		})
	}
	for g := range convs {
		work <- g
	}
	close(work)
	wg.Wait()
}

// TestReconnectStormOf2000ClientsAllResumeWithinMemoryBound: 2,000
// persistent clients (v5 and v3.1.1 alternating) of 100 groups are
// connected to a chatd subprocess; all drop at once, a message goes to
// every group meanwhile, and all reconnect within one second. Every client
// resumes with the message it missed, and chatd's resident memory stays
// under 1 GiB throughout (sampled every 50 ms).
func TestReconnectStormOf2000ClientsAllResumeWithinMemoryBound(t *testing.T) {
	const clients, groupSize = 2000, 20
	const memBound = 1 << 30
	url := pgtest.NewDB(t)
	pool := openPool(t, url, 8)
	svc := newService(pool)
	all := make([]*stormClient, clients)
	convs := stormGroups(t, svc, "storm ", clients, groupSize, func(u, conv int64, v byte) {
		// readBuf holds what arrives between CONNACK and SUBACK, when
		// nobody drains it: a resumed session is delivered to at once,
		// and a group's sender gets its message back plus a
		// delivery.updated per member and presence events. With 16 the
		// buffer filled, the client's read loop stopped before the
		// SUBACK, and the harness dropped that connection, together with
		// the messages it had already acknowledged (seen under load:
		// "1 of 2000 clients lack message 2", always a sender).
		all[u-1] = &stormClient{dev: device{user: u, clientID: fmt.Sprintf("storm-%d", u), version: v, readBuf: 128}, conv: conv}
	})
	t.Cleanup(func() {
		for _, sc := range all {
			if sc != nil && sc.c != nil {
				sc.c.Drop()
			}
		}
	})
	p := newProc(t, url, nil)
	p.start()
	rssIdle := p.rssBytes()

	// connectAll connects every client, spread over spread, and returns
	// how many attempts failed and were retried.
	connectAll := func(spread time.Duration) int64 {
		var failures atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i, sc := range all {
			wg.Go(func() {
				time.Sleep(time.Until(start.Add(spread * time.Duration(i) / clients)))
				deadline := time.Now().Add(60 * time.Second)
				for {
					c, err := sc.dev.connect(t, p.MQTT)
					if err == nil {
						sc.c = c
						return
					}
					failures.Add(1)
					if time.Now().After(deadline) {
						t.Errorf("client %s could not reconnect: %v", sc.dev.clientID, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		return failures.Load()
	}
	sendRound := func(seq int) { sendToGroups(t, p.HTTP, convs, groupSize, fmt.Sprintf("round %d", seq)) }
	waitAll := func(seq int64, within time.Duration) {
		deadline := time.Now().Add(within)
		for {
			missing := 0
			for _, sc := range all {
				sc.drain()
				if sc.have < seq {
					missing++
				}
			}
			if missing == 0 {
				return
			}
			if time.Now().After(deadline) {
				var who []string
				for _, sc := range all {
					if sc.have < seq && len(who) < 5 {
						who = append(who, sc.describe())
					}
				}
				t.Fatalf("%d of %d clients lack message %d after %v: %s", missing, clients, seq, within, strings.Join(who, "; "))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	began := time.Now()
	if n := connectAll(0); n > 0 {
		t.Logf("initial connect: %d attempts retried", n)
	}
	connectTime := time.Since(began)
	sendRound(1)
	waitAll(1, 60*time.Second)
	rssConnected := p.rssBytes()
	goroutinesBefore := metricValue(t, p.HTTP, "go_goroutines")

	// The storm: everyone drops at once, the world moves on, everyone
	// comes back within one second.
	for _, sc := range all {
		sc.c.Drop()
	}
	for _, sc := range all {
		<-sc.c.Done
	}
	sendRound(2)
	peakRSS := p.samplePeakRSS(50 * time.Millisecond)
	stormAt := time.Now()
	retried := connectAll(time.Second)
	reconnected := time.Since(stormAt)
	waitAll(2, 60*time.Second)
	resumed := time.Since(stormAt)
	peak := peakRSS()
	rssAfter := p.rssBytes()
	goroutinesAfter := metricValue(t, p.HTTP, "go_goroutines")

	dups := 0
	for _, sc := range all {
		if sc.bad != "" {
			t.Errorf("%s: %s", sc.dev.clientID, sc.bad)
		}
		dups += sc.dups
	}
	if peak >= memBound {
		t.Errorf("chatd's resident memory peaked at %s during the storm, bound %s", mib(peak), mib(memBound))
	}
	t.Logf("%d clients (v5 and v3.1.1, persistent) connected in %v; chatd RSS idle %s, with %d clients %s (%d goroutines)",
		clients, connectTime.Round(time.Millisecond), mib(rssIdle), clients, mib(rssConnected), int(goroutinesBefore))
	t.Logf("storm: all dropped at once and reconnected within 1 s: all connected after %v (%d attempts retried), all resumed with the missed message after %v; %d duplicates dropped",
		reconnected.Round(time.Millisecond), retried, resumed.Round(time.Millisecond), dups)
	t.Logf("chatd RSS peak during the storm %s (bound %s), after %s; goroutines %d before, %d after",
		mib(peak), mib(memBound), mib(rssAfter), int(goroutinesBefore), int(goroutinesAfter))
}
