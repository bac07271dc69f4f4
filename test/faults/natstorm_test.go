package faults_test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/fleet"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// Mobile carriers put thousands of phones behind one public address
// (CGNAT), and a cell-tower hand-over or a chatd restart makes them
// reconnect together. With chatd's DEFAULT limits, 2,000 persistent
// sessions (v5 and 3.1.1) from one address drop at once, a message goes to
// each of their 100 groups meanwhile, and all reconnect at once: all must
// be back and have the message within 10 s. The old per-IP limit (10/s,
// burst 20) took about 200 s. The phones are the fleet program (built
// without the race detector, like chatd), so the bound is chatd's.
func TestTwoThousandPhonesBehindOneAddressAreBackAndCaughtUpWithin10sWithTheDefaultLimits(t *testing.T) {
	const clients, groupSize = 2000, 20
	const within = 10 * time.Second
	const natAddr = "127.0.0.1"
	url := pgtest.NewDB(t)
	pool := openPool(t, url, 8)
	svc := newService(pool)
	phones := make([]fleet.Phone, clients)
	convs := stormGroups(t, svc, "nat ", clients, groupSize, func(u, conv int64, v byte) {
		phones[u-1] = fleet.Phone{ClientID: fmt.Sprintf("nat-%d", u), User: u, Version: v, Password: testnode.Token(t, u),
			Local: natAddr, Conv: conv}
		if v == 5 {
			phones[u-1].Expiry = 3600
		}
	})
	p := newProcWithDefaults(t, url, nil)
	p.start()
	fl := startFleet(t, p.MQTT, phones)

	sendRound := func(round int) { sendToGroups(t, p.HTTP, convs, groupSize, fmt.Sprintf("round %d", round)) }
	start := time.Now()
	res := fl.connect(time.Now().Add(60 * time.Second))
	t.Logf("initial connect of %d phones from %s with the default limits: %v (refusals %v)", clients, natAddr, time.Since(start).Round(time.Millisecond), res.Refused)
	sendRound(1)
	testkit.WaitFor(t, 60*time.Second, "every phone to have message 1", func() bool { return fl.missing(1) == 0 })

	// The storm: all drop at once, the groups move on, all come back at once.
	stormAt := time.Now()
	fl.drop()
	sendRound(2)
	awayFor := time.Since(stormAt)
	res = fl.connect(stormAt.Add(within))
	back := time.Since(stormAt)
	deadline := stormAt.Add(within)
	for fl.missing(2) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	resumed := time.Since(stormAt)
	for _, e := range res.Errors {
		t.Error(e)
	}
	if n := fl.missing(2); n > 0 {
		t.Errorf("%d of %d phones lack the message sent while they were away %v after the storm began", n, clients, within)
	}
	attempts := clients
	var codes []string
	for c, n := range res.Refused {
		attempts += n
		codes = append(codes, fmt.Sprintf("%s×%d", c, n))
	}
	sort.Strings(codes)
	backAfter := res.BackAfterMs
	slices.Sort(backAfter)
	ms := func(i int) time.Duration { return time.Duration(backAfter[i]) * time.Millisecond }
	t.Logf("storm: dropping all and sending the 100 messages took %v; reconnects (from then) done: 25%% after %v, 50%% %v, 90%% %v, all %v",
		awayFor.Round(time.Millisecond), ms(clients/4), ms(clients/2), ms(clients*9/10), ms(clients-1))
	t.Logf("storm: %d persistent sessions from one address dropped at once and reconnected at once: all back %v after the drop, all caught up after %v (bound %v); %d CONNECT attempts, refusals by CONNACK code %v",
		clients, back.Round(time.Millisecond), resumed.Round(time.Millisecond), within, attempts, codes)
	for _, v := range fl.violations() {
		t.Error(v)
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
			d := device{user: int64(5000 + i), clientID: fmt.Sprintf("other-%d", i), version: byte(4 + i%2), readBuf: 64, local: "127.0.0.3"}
			start := time.Now()
			c, ack, err := mqtttest.Dial(p.MQTT, d.options(t))
			if err == nil {
				t.Cleanup(c.Drop)
				var codes []byte
				if codes, err = c.Subscribe(testnode.EventsTopic(d.user)); err == nil && (len(codes) != 1 || codes[0] >= 0x80) {
					err = fmt.Errorf("subscribe: %v", codes)
				}
			}
			lat[i] = time.Since(start)
			if err != nil {
				failed.Add(1)
				t.Errorf("phone %d from another address refused during the flood: 0x%02x %v", i, ack.ReasonCode, err)
			}
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
