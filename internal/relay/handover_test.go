package relay_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// A leader that cannot reach Kafka (its own network or settings) while a
// relay standing by on another node could must not hold the outbox back
// from every node: after HandOverAfter of failed writes it hands the
// lease over, and the standby publishes what waited, in order, once.
func TestALeaderThatCannotReachKafkaHandsTheLeaseToAStandbyThatCan(t *testing.T) {
	pool := pgtest.NewPool(t)
	port := kafkaPort(t)
	cut := testConfig(t, testkit.FreePort(t), nil) // no Kafka listens there
	cut.NodeID, cut.HandOverAfter = "cut-off", time.Second
	a := newRelay(t, pool, cut)
	start(t, a.Run)
	testkit.WaitFor(t, 5*time.Second, "the cut-off relay leading", a.Leading)
	reaches := testConfig(t, port, nil)
	reaches.NodeID = "reaches-kafka"
	b := newRelay(t, pool, reaches)
	start(t, b.Run)

	ev := newEvents(pool)
	for range 20 {
		ev.mustInsert(t, 41, 42)
		a.Kick()
	}
	testkit.WaitFor(t, 15*time.Second, "the outbox published by the relay that reaches Kafka", func() bool { return outboxCount(t, pool) == 0 })
	want, total := ev.counts()
	if d := checkMessages(t, readUntil(t, addr(port), total, 10*time.Second), want); d.duplicates != 0 {
		t.Fatalf("%d rows published twice", d.duplicates)
	}
	if !b.Leading() || a.Leading() {
		t.Fatalf("leading: cut-off relay %v, the one that reaches Kafka %v", a.Leading(), b.Leading())
	}
}
