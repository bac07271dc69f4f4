package faults_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// natDevice is one phone of the storm with what its app has seen.
type natDevice struct {
	dev  device
	conv int64
	app  *app
	c    atomic.Pointer[mqtttest.Client]
}

// connectUntil connects d, retrying a refused or failed attempt after a
// jittered 200-600 ms (as a phone's MQTT library backs off), until
// deadline; it returns how many attempts were refused, by CONNACK code.
func (d *natDevice) connectUntil(t *testing.T, addr string, deadline time.Time, rnd *rand.Rand) map[byte]int {
	refused := map[byte]int{}
	for {
		c, _, ack, err := d.dial(t, addr)
		if err == nil {
			d.c.Store(c)
			d.app.follow(c)
			return refused
		}
		refused[ack]++
		if time.Now().After(deadline) {
			t.Errorf("%s could not reconnect: %v (refusals %v)", d.dev.clientID, err, refused)
			return refused
		}
		time.Sleep(200*time.Millisecond + time.Duration(rnd.IntN(400))*time.Millisecond)
	}
}

func (d *natDevice) dial(t *testing.T, addr string) (*mqtttest.Client, bool, byte, error) {
	c, ack, err := mqtttest.Dial(addr, d.dev.options(t))
	if err != nil {
		return nil, false, ack.ReasonCode, err
	}
	codes, err := c.Subscribe(testnode.EventsTopic(d.dev.user))
	if err != nil || len(codes) != 1 || codes[0] >= 0x80 {
		c.Drop()
		return nil, false, 0xff, fmt.Errorf("subscribe: %v %v", codes, err)
	}
	return c, true, 0, nil
}

// Mobile carriers put thousands of phones behind one public address
// (CGNAT), and a cell-tower hand-over or a chatd restart makes them
// reconnect together. With chatd's DEFAULT limits, 2,000 persistent
// sessions (v5 and 3.1.1) from one address drop at once, a message goes to
// each of their 100 groups meanwhile, and all reconnect at once: all must
// be back and have the message within 10 s. The old per-IP limit (10/s,
// burst 20) took about 200 s.
func TestTwoThousandPhonesBehindOneAddressAreBackAndCaughtUpWithin10sWithTheDefaultLimits(t *testing.T) {
	const clients, groupSize = 2000, 20
	const within = 10 * time.Second
	const natAddr = "127.0.0.1"
	url := pgtest.NewDB(t)
	pool := openPool(t, url, 8)
	svc := newService(pool)
	all := make([]*natDevice, clients)
	convs := stormGroups(t, svc, "nat ", clients, groupSize, func(u, conv int64, v byte) {
		all[u-1] = &natDevice{dev: device{user: u, clientID: fmt.Sprintf("nat-%d", u), version: v, readBuf: 256, local: natAddr},
			conv: conv, app: newApp(fmt.Sprintf("phone %d", u))}
	})
	t.Cleanup(func() {
		for _, d := range all {
			if c := d.c.Load(); c != nil {
				c.Drop()
			}
		}
	})
	p := newProcWithDefaults(t, url, nil)
	p.start()

	backAfter := make([]time.Duration, clients) // of the last connectAll
	connectAll := func(deadline time.Time) (map[byte]int, time.Duration) {
		var mu sync.Mutex
		refused := map[byte]int{}
		var wg sync.WaitGroup
		start := time.Now()
		for i, d := range all {
			wg.Go(func() {
				r := d.connectUntil(t, p.MQTT, deadline, rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))))
				backAfter[i] = time.Since(start)
				mu.Lock()
				for c, n := range r {
					refused[c] += n
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		return refused, time.Since(start)
	}
	sendRound := func(round int) { sendToGroups(t, p.HTTP, convs, groupSize, fmt.Sprintf("round %d", round)) }
	caughtUp := func(seq int64) int {
		missing := 0
		for _, d := range all {
			if !d.app.caughtUp(map[int64]int64{d.conv: seq}) {
				missing++
			}
		}
		return missing
	}

	refused, took := connectAll(time.Now().Add(60 * time.Second))
	t.Logf("initial connect of %d phones from %s with the default limits: %v (refusals %v)", clients, natAddr, took.Round(time.Millisecond), refused)
	sendRound(1)
	testkit.WaitFor(t, 60*time.Second, "every phone to have message 1", func() bool { return caughtUp(1) == 0 })

	// The storm: all drop at once, the groups move on, all come back at once.
	stormAt := time.Now()
	for _, d := range all {
		d.c.Load().Drop()
	}
	for _, d := range all {
		<-d.c.Load().Done
	}
	sendRound(2)
	awayFor := time.Since(stormAt)
	refused, _ = connectAll(stormAt.Add(within))
	back := time.Since(stormAt)
	deadline := stormAt.Add(within)
	for caughtUp(2) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	resumed := time.Since(stormAt)
	if n := caughtUp(2); n > 0 {
		t.Errorf("%d of %d phones lack the message sent while they were away %v after the storm began", n, clients, within)
	}
	attempts := clients
	var codes []string
	for c, n := range refused {
		attempts += n
		codes = append(codes, fmt.Sprintf("0x%02x×%d", c, n))
	}
	sort.Strings(codes)
	sort.Slice(backAfter, func(i, j int) bool { return backAfter[i] < backAfter[j] })
	t.Logf("storm: dropping all and sending the 100 messages took %v; reconnects (from then) done: 25%% after %v, 50%% %v, 90%% %v, all %v",
		awayFor.Round(time.Millisecond), backAfter[clients/4].Round(time.Millisecond), backAfter[clients/2].Round(time.Millisecond),
		backAfter[clients*9/10].Round(time.Millisecond), backAfter[clients-1].Round(time.Millisecond))
	t.Logf("storm: %d persistent sessions from one address dropped at once and reconnected at once: all back %v after the drop, all caught up after %v (bound %v); %d CONNECT attempts, refusals %v",
		clients, back.Round(time.Millisecond), resumed.Round(time.Millisecond), within, attempts, codes)
	for _, d := range all {
		d.app.mu.Lock()
		if len(d.app.violations) > 0 {
			t.Errorf("%s: %v", d.app.name, d.app.violations)
		}
		d.app.mu.Unlock()
	}
}

// With a per-IP limit in the hundreds, one address flooding CONNECTs with
// bad tokens must still not starve everyone else of the node's connect
// budget: the flood is refused per IP (0x9F) before it costs a turn of the
// budget, and 200 phones connecting from another address at the same time
// all get in at once, with the default limits.
func TestABadTokenFloodFromOneAddressDoesNotStarveOthersWithTheDefaultLimits(t *testing.T) {
	const flooders, others = 32, 200
	const flood = 4 * time.Second
	p := newProcWithDefaults(t, pgtest.NewDB(t), nil)
	p.start()

	var stop atomic.Bool
	var mu sync.Mutex
	floodCodes := map[byte]int{}
	var fwg sync.WaitGroup
	floodStart := time.Now()
	for i := 0; i < flooders; i++ {
		fwg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				_, ack, err := mqtttest.Dial(p.MQTT, mqtttest.Options{Version: 5, ClientID: fmt.Sprintf("flood-%d-%d", i, n), Password: "forged.token.value",
					Clean: true, ReadBuffer: 1, LocalAddr: "127.0.0.2"})
				code := ack.ReasonCode
				if err == nil {
					code = 0
				}
				mu.Lock()
				floodCodes[code]++
				mu.Unlock()
			}
		})
	}
	// Let the flood spend its address's burst first.
	testkit.WaitFor(t, 10*time.Second, "the flood to be limited per IP", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return floodCodes[0x9F] > 0
	})
	var wg sync.WaitGroup
	lat := make([]time.Duration, others)
	var failed atomic.Int64
	othersStart := time.Now()
	for i := 0; i < others; i++ {
		wg.Go(func() {
			d := &natDevice{dev: device{user: int64(5000 + i), clientID: fmt.Sprintf("other-%d", i), version: byte(4 + i%2), readBuf: 64, local: "127.0.0.3"}, app: newApp("other")}
			start := time.Now()
			c, _, code, err := d.dial(t, p.MQTT)
			lat[i] = time.Since(start)
			if err != nil {
				failed.Add(1)
				t.Errorf("phone %d from another address refused during the flood: 0x%02x %v", i, code, err)
				return
			}
			t.Cleanup(c.Drop)
		})
	}
	wg.Wait()
	othersTook := time.Since(othersStart)
	for time.Since(floodStart) < flood {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	fwg.Wait()
	floodFor := time.Since(floodStart)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	mu.Lock()
	total := 0
	for _, n := range floodCodes {
		total += n
	}
	t.Logf("flood from one address: %d bad-token CONNECTs in %v (%.0f/s): %d refused per IP (0x9F), %d got to the token (0x86), %d other %v",
		total, floodFor.Round(time.Millisecond), float64(total)/floodFor.Seconds(), floodCodes[0x9F], floodCodes[0x86], total-floodCodes[0x9F]-floodCodes[0x86], floodCodes)
	mu.Unlock()
	t.Logf("meanwhile %d phones from another address connected in %v: CONNECT+SUBSCRIBE p50 %v, p99 %v, max %v, %d refused",
		others, othersTook.Round(time.Millisecond), lat[others/2].Round(time.Millisecond), lat[others*99/100].Round(time.Millisecond), lat[others-1].Round(time.Millisecond), failed.Load())
	if lat[others-1] > 5*time.Second {
		t.Errorf("a phone took %v to connect during the flood", lat[others-1])
	}
}
