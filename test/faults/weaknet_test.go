package faults_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// weakPersistent runs the weak-network apps with persistent sessions
// (client.Config.SessionDir): chatd replays what a blackholed app missed
// and the client fills through history only what the replay does not
// bring. (It was false while the client sent Request Problem Information
// = 0, which made chatd strip the seq from PUBACKs.)
const weakPersistent = true

// link is a toxiproxy proxy on loopback in front of one chatd port.
type link struct {
	t     *testing.T
	proxy *toxiproxy.Proxy
}

var toxiServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxics log through zerolog's global logger
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

func newLink(t *testing.T, name, upstream string) *link {
	t.Helper()
	p := toxiproxy.NewProxy(toxiServer(), name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("start proxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return &link{t: t, proxy: p}
}

func (l *link) addr() string { return l.proxy.Listen }

// add installs a toxic on one stream ("upstream": client to chatd,
// "downstream": chatd to client).
func (l *link) add(name, typ, stream string, attrs string) {
	l.t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		l.t.Fatalf("add toxic %s: %v", name, err)
	}
}

func (l *link) remove(name string) {
	l.t.Helper()
	if err := l.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		l.t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// both installs a toxic on both streams (names get a suffix).
func (l *link) both(name, typ, attrs string) {
	l.add(name+"-up", typ, "upstream", attrs)
	l.add(name+"-down", typ, "downstream", attrs)
}

func (l *link) removeBoth(name string) {
	l.remove(name + "-up")
	l.remove(name + "-down")
}

// chatApp is an application on top of the client package: it records the
// message.new events handed to it and checks they come exactly once and
// in order.
type chatApp struct {
	name       string
	c          *client.Client
	mu         sync.Mutex
	have       map[int64]int64
	at         map[int64]time.Time // when have last moved
	events     int
	fromHist   int
	violations []string
	done       chan struct{}
}

func runApp(name string, c *client.Client) *chatApp {
	a := &chatApp{name: name, c: c, have: map[int64]int64{}, at: map[int64]time.Time{}, done: make(chan struct{})}
	for conv, seq := range c.Positions() {
		a.have[conv] = seq
	}
	go func() {
		defer close(a.done)
		for ev := range c.Events() {
			if ev.Type != client.EventMessageNew {
				continue
			}
			a.mu.Lock()
			if ev.Seq != a.have[ev.ConversationID]+1 && len(a.violations) < 20 {
				a.violations = append(a.violations, fmt.Sprintf("conversation %d: seq %d handed on after %d", ev.ConversationID, ev.Seq, a.have[ev.ConversationID]))
			}
			if ev.Seq > a.have[ev.ConversationID] {
				a.have[ev.ConversationID] = ev.Seq
				a.at[ev.ConversationID] = time.Now()
			}
			a.events++
			if ev.FromHistory {
				a.fromHist++
			}
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *chatApp) position(conv int64) (int64, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.have[conv], a.at[conv]
}

// TestWeakNetworkConversationReachesEveryAppExactlyOnceInOrder: five users
// (three over MQTT TCP, two over MQTT WebSocket, all through the client
// package with persistent sessions and a 5 s keepalive) talk in one group
// behind toxiproxy: 300 ms ± 100 ms latency each way, 64 kbit/s each way,
// packets sliced into small fragments, connections reset at random, and one
// blackhole (data accepted, never delivered) that lasts until both ends of
// each link in it noticed through keepalive alone (or FAULTS_BLACKHOLE, when
// set and longer). Every app is handed every message exactly once and in
// order; the test reports the time from link restoration to fully caught up.
func TestWeakNetworkConversationReachesEveryAppExactlyOnceInOrder(t *testing.T) {
	t.Parallel() // waits on toxiproxy, not the CPU: see the package comment
	minHole := knob("FAULTS_BLACKHOLE", 0, 0)
	perUser := 12
	if inCI() {
		perUser = 6
	}
	url := pgtest.NewDB(t)
	srv := startNode(t, url, nil)
	conv := mustGroup(t, srv.Service, "weak", []int64{2, 3, 4, 5})
	// The conversation's first message is sent before the apps exist and
	// their position starts at 0: each app fetches it through history
	// (afterSeq=0, sent explicitly, pages from seq 1), while the others
	// commit meanwhile.
	if _, err := srv.Service.Send(context.Background(), chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: newID(), Body: "welcome"}); err != nil {
		t.Fatal(err)
	}
	// Every user has a link of its own, so one user's blackhole does not
	// silence the others: users 1 to 3 over MQTT TCP, 4 and 5 over MQTT
	// WebSocket.
	links := map[int64]*link{}
	for u := int64(1); u <= 5; u++ {
		if u <= 3 {
			links[u] = newLink(t, fmt.Sprintf("mqtt-%d", u), srv.MQTTAddr())
		} else {
			links[u] = newLink(t, fmt.Sprintf("ws-%d", u), srv.HTTPAddr())
		}
		links[u].both("latency", "latency", `{"latency":300,"jitter":100}`)
		links[u].both("bandwidth", "bandwidth", `{"rate":8}`) // KB/s: 64 kbit/s
		links[u].both("slicer", "slicer", `{"average_size":48,"size_variation":32,"delay":200}`)
	}

	apps := map[int64]*chatApp{}
	for u := int64(1); u <= 5; u++ {
		broker := "mqtt://" + links[u].addr()
		if u >= 4 {
			broker = "ws://" + links[u].addr() + "/mqtt"
		}
		sessionDir := ""
		if weakPersistent {
			sessionDir = t.TempDir()
		}
		c, err := client.New(context.Background(), client.Config{
			Brokers:           []string{broker},
			UserID:            u,
			Token:             testnode.Token(t, u),
			SessionDir:        sessionDir,
			KeepAlive:         5 * time.Second,
			MaxReconnectDelay: time.Second,
			AckTimeout:        10 * time.Second,
			RequestTimeout:    20 * time.Second,
			Positions:         map[int64]int64{conv.ID: 0},
			Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("app", u),
		})
		if err != nil {
			t.Fatal(err)
		}
		apps[u] = runApp(fmt.Sprintf("user %d (%s)", u, broker[:strings.Index(broker, ":")]), c)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Close(ctx)
		})
	}
	for u, a := range apps {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := a.c.AwaitConnection(ctx); err != nil {
			t.Fatalf("user %d: %v", u, err)
		}
		cancel()
	}

	// Random connection resets until the end (paused during the blackhole).
	var resets atomic.Int64
	var chaosMu sync.Mutex
	stopChaos := make(chan struct{})
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		rnd := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stopChaos:
				return
			case <-time.After(time.Duration(2000+rnd.IntN(3000)) * time.Millisecond):
			}
			l := links[1+rnd.Int64N(5)]
			chaosMu.Lock()
			l.add("reset", "reset_peer", "downstream", `{"timeout":0}`)
			time.Sleep(400 * time.Millisecond)
			l.remove("reset")
			chaosMu.Unlock()
			resets.Add(1)
		}
	}()

	// The scripted conversation: every user sends perUser messages of
	// about 100 bytes with pauses; the blackhole starts after a third.
	var sent atomic.Int64
	total := int64(5*perUser) + 1 // and the welcome message
	var wg sync.WaitGroup
	sendStart := time.Now()
	for u := int64(1); u <= 5; u++ {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(u), 7))
			for i := 0; i < perUser; i++ {
				body := fmt.Sprintf("user %d message %d ", u, i)
				body += strings.Repeat("x", 100-len(body))
				ctx, cancel := context.WithTimeout(context.Background(), minHole+3*time.Minute)
				_, err := apps[u].c.Send(ctx, conv.ID, body)
				cancel()
				if err != nil {
					t.Errorf("user %d message %d: %v", u, i, err)
					return
				}
				sent.Add(1)
				time.Sleep(time.Duration(100+rnd.IntN(400)) * time.Millisecond)
			}
		})
	}
	testkit.WaitFor(t, 2*time.Minute, "a third of the conversation", func() bool { return sent.Load() >= total/3 })
	// Users 3, 4 and 5 go into a blackhole; 1 and 2 keep talking. Each
	// goes in connected, and the hole lasts until both ends noticed the
	// link dead through keepalive alone: the app its PINGRESP missing (up
	// to 2 × 5 s), chatd 1.5 × 5 s without a packet. The app, disconnected,
	// tries again into the hole, an attempt that never gets its CONNACK.
	blackholed := []int64{3, 4, 5}
	chaosMu.Lock()
	serverSideClosed := map[int64]func() bool{}
	for _, u := range blackholed {
		c := apps[u].c
		testkit.WaitFor(t, time.Minute, fmt.Sprintf("user %d to be connected before the blackhole", u), c.Connected)
		cl, ok := srv.Broker.Server.Clients.Get(c.ClientID())
		if !ok {
			t.Fatalf("user %d is connected, chatd lists no client %s", u, c.ClientID())
		}
		serverSideClosed[u] = cl.Closed
	}
	for _, u := range blackholed {
		links[u].both("blackhole", "timeout", `{"timeout":0}`)
	}
	holeAt := time.Now()
	testkit.WaitFor(t, time.Minute, "both ends of every blackholed link to notice it dead", func() bool {
		for _, u := range blackholed {
			if apps[u].c.Connected() || !serverSideClosed[u]() {
				return false
			}
		}
		return true
	})
	time.Sleep(minHole - time.Since(holeAt))
	blackhole := time.Since(holeAt)
	for _, u := range blackholed {
		links[u].removeBoth("blackhole")
	}
	chaosMu.Unlock()
	restoredAt := time.Now()
	pool := openPool(t, url, 1)
	// Everything committed by now must reach every app.
	target := checkGapless(t, pool, []int64{conv.ID})[conv.ID]
	var missedInHole int64
	for _, u := range blackholed {
		have, _ := apps[u].position(conv.ID)
		missedInHole = max(missedInHole, target-have)
	}
	caught := map[int64]time.Duration{}
	for _, u := range blackholed {
		a := apps[u]
		testkit.WaitFor(t, 2*time.Minute, fmt.Sprintf("user %d to catch up after the blackhole", u), func() bool {
			have, at := a.position(conv.ID)
			if have >= target {
				caught[u] = max(at.Sub(restoredAt), 0)
				return true
			}
			return false
		})
	}
	slowest := time.Duration(0)
	for _, d := range caught {
		slowest = max(slowest, d)
	}
	wg.Wait()
	close(stopChaos)
	<-chaosDone
	sendTime := time.Since(sendStart)

	last := checkGapless(t, pool, []int64{conv.ID})[conv.ID]
	if last != total {
		t.Errorf("conversation holds %d messages, the users sent %d (a resend stored twice?)", last, total)
	}
	for u, a := range apps {
		testkit.WaitFor(t, time.Minute, fmt.Sprintf("user %d to have every message", u), func() bool { have, _ := a.position(conv.ID); return have >= last })
	}
	time.Sleep(500 * time.Millisecond)
	for u := int64(1); u <= 5; u++ {
		a := apps[u]
		a.mu.Lock()
		for _, v := range a.violations {
			t.Errorf("%s: %s", a.name, v)
		}
		if a.events != int(last) {
			t.Errorf("%s: %d message.new events handed on, want exactly %d", a.name, a.events, last)
		}
		st := a.c.Stats()
		t.Logf("%s: %d messages exactly once in order (%d fetched through history); connects %d, duplicates dropped %d, gap fills %d, resends %d",
			a.name, a.events, a.fromHist, st.Connects, st.Duplicates, st.GapFills, st.Resends)
		a.mu.Unlock()
	}
	t.Logf("%d messages by 5 users over %v behind 300±100 ms latency, 64 kbit/s, sliced packets, %d random resets; users %v in a %v blackhole from %v into the run",
		last, sendTime.Round(time.Millisecond), resets.Load(), blackholed, blackhole, holeAt.Sub(sendStart).Round(time.Millisecond))
	t.Logf("link restored -> blackholed apps fully caught up (up to %d messages missed, seq %d): %v (per user: %v)", missedInHole, target, slowest.Round(time.Millisecond), caught)
}
