package faults_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// TestChatdKilledUnderLoadLosesNothingAndClientsResume: chatd (a
// subprocess) is SIGKILLed while senders are publishing and members are
// receiving, then started again on the same ports. Senders resend what was
// not acknowledged with the same clientMsgId; members reconnect with their
// persistent sessions (v5 and v3.1.1) and resume from their cursors; a
// member who was offline the whole time returns at the end.
func TestChatdKilledUnderLoadLosesNothingAndClientsResume(t *testing.T) {
	url := pgtest.NewDB(t)
	pool := openPool(t, url, 4)
	svc := newService(pool)
	convs := createGroups(t, svc, 3, "kill ", []int64{2, 3, 4, 5, 6})
	p := newProc(t, url, map[string]string{"CHAT_MAX_INFLIGHT": "16"})
	p.start()
	addr := func() string { return p.MQTT }

	// Members 2..5 online (v5 and v3.1.1 alternating), member 6 away.
	apps := map[int64]*app{}
	var live []*liveDevice
	for u := int64(2); u <= 5; u++ {
		v := byte(5)
		if u%2 == 1 {
			v = 4
		}
		apps[u] = newApp(fmt.Sprintf("user %d (v%d)", u, v))
		live = append(live, keepConnected(t, device{user: u, clientID: fmt.Sprintf("kill-phone-%d", u), version: v}, apps[u], addr))
	}
	away := device{user: 6, clientID: "kill-phone-6", version: 4}
	away.goAway(t, addr)
	apps[6] = newApp("user 6 (v4, offline during the kill)")

	// Member 2 marks what it has read as it goes; acknowledged receipts must
	// survive the kill.
	var readMu sync.Mutex
	readAcked := map[int64]int64{}
	stopReads := make(chan struct{})
	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		for {
			select {
			case <-stopReads:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, conv := range convs {
				seq := apps[2].position(conv)
				if seq == 0 {
					continue
				}
				rc := live[0].client()
				if ack, err := rc.Publish(testnode.ReadTopic(conv), 1, fmt.Appendf(nil, `{"seq":%d}`, seq)); err == nil && ack.ReasonCode < 0x80 {
					readMu.Lock()
					readAcked[conv] = max(readAcked[conv], seq)
					readMu.Unlock()
				}
			}
		}
	}()

	led := newLedger()
	const perSender = 150
	var sent atomic.Int64
	var wg sync.WaitGroup
	senders := mixedSenders("kill", addr, led, 1, 3, 4)
	sendLoad(t, &wg, senders, convs, 9, 90*time.Second, &sent, func(n int) bool { return n < perSender })
	testkit.WaitFor(t, 60*time.Second, "load to build up", func() bool { return sent.Load() >= perSender })
	before := snapshotMarks(t, pool)
	ackedBefore := led.count()
	p.kill() // SIGKILL in the middle of sends, deliveries and receipts
	killedAt := time.Now()
	p.start()
	restartedIn := time.Since(killedAt)
	wg.Wait()
	close(stopReads)
	<-readsDone

	last := checkGapless(t, pool, convs)
	led.check(t, pool)
	if got := led.count(); got != len(senders)*perSender {
		t.Fatalf("%d messages acknowledged, want %d", got, len(senders)*perSender)
	}
	caughtUp := everyAppReceivesExactly(t, apps, away, addr, last, 60*time.Second)
	after := snapshotMarks(t, pool)
	before.notBehind(t, after)
	readMu.Lock()
	for conv, seq := range readAcked {
		if got := after[fmt.Sprintf("read conv=%d user=2", conv)]; got < seq {
			t.Errorf("acknowledged read receipt of user 2 in conversation %d lost: watermark %d < %d", conv, got, seq)
		}
	}
	readMu.Unlock()

	var total int64
	for _, l := range last {
		total += l
	}
	t.Logf("SIGKILL after %d acknowledged sends; chatd back on the same ports in %v; %d messages acknowledged in total, all stored once with their seq, gapless in %d conversations",
		ackedBefore, restartedIn.Round(time.Millisecond), total, len(convs))
	for _, s := range senders {
		t.Log(s.stats())
	}
	for u := int64(2); u <= 6; u++ {
		a := apps[u]
		reconnects := int64(0)
		if u <= 5 {
			reconnects = live[u-2].connects.Load() - 1
		}
		t.Logf("%s: %d messages in order, %d duplicates dropped by (conversationId, seq), %d reconnects", a.name, a.total, a.dups, reconnects)
	}
	t.Logf("returning member caught up %d messages in %v", apps[6].total, caughtUp.Round(time.Millisecond))
}
