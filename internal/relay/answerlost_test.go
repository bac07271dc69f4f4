package relay_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// deleteSQL is the relay's DELETE of the rows Kafka took.
const deleteSQL = "DELETE FROM outbox WHERE id = ANY"

// relayThrough starts Kafka and a relay whose PostgreSQL connection
// goes through proxy, with three rows waiting (conversation 21 twice,
// 22 once) and the relay's DELETE of them armed by arm; it returns
// Kafka's port and the rows' writer, once the outbox is empty.
func relayThrough(t *testing.T, arm func(*pgtest.AnswerLosing) <-chan struct{}) (int, *events) {
	t.Helper()
	pool := pgtest.NewPool(t)
	proxy := pgtest.NewAnswerLosing(t, pool)
	ev := newEvents(pool)
	ev.mustInsert(t, 21, 22, 21)
	cut := arm(proxy)
	port := kafkaPort(t)
	rl := newRelay(t, proxy.Pool, testConfig(t, port, nil))
	start(t, rl.Run)
	rl.Kick()
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay's DELETE was not cut")
	}
	// The relay takes its lease again on a new connection and goes on.
	ev.mustInsert(t, 22, 21)
	rl.Kick()
	testkit.WaitFor(t, 20*time.Second, "the outbox drained", func() bool { return outboxCount(t, pool) == 0 })
	return port, ev
}

// TestARelayDeleteWhoseAnswerIsLostSendsEachRowOnce: the relay's DELETE
// of the rows Kafka took committed, and its answer was lost with the
// connection. The relay's session ends with it; on its next one the
// rows are gone, so each event is in Kafka once, and the events
// committed after it are relayed too.
func TestARelayDeleteWhoseAnswerIsLostSendsEachRowOnce(t *testing.T) {
	t.Parallel()
	port, ev := relayThrough(t, func(p *pgtest.AnswerLosing) <-chan struct{} { return p.LoseAnswer(deleteSQL, nil) })
	want, total := ev.counts()
	msgs := readUntil(t, addr(port), total, 10*time.Second)
	if d := checkMessages(t, msgs, want); d.duplicates != 0 || len(msgs) != total {
		t.Fatalf("%d messages in Kafka, %d duplicates; want %d, none", len(msgs), d.duplicates, total)
	}
}

// TestARelayDeleteThatNeverRanSendsTheRowsAgain: the connection died with
// the relay's DELETE on its way, so PostgreSQL never ran it; the relay
// cannot tell that from a lost answer. Its next session finds the rows
// and relays them again (at least once): in Kafka each of them twice,
// with its eventId and seq, which consumers' sessions drop as a seq they
// have; nothing is lost, and per conversation the first occurrences are
// in order.
func TestARelayDeleteThatNeverRanSendsTheRowsAgain(t *testing.T) {
	t.Parallel()
	port, ev := relayThrough(t, func(p *pgtest.AnswerLosing) <-chan struct{} { return p.LoseRequest(deleteSQL) })
	want, total := ev.counts()
	msgs := readUntil(t, addr(port), total+3, 10*time.Second)
	if len(msgs) != total+3 {
		t.Fatalf("Kafka holds %d messages, want %d (the 3 rows whose DELETE never ran twice)", len(msgs), total+3)
	}
	if d := checkMessages(t, msgs, want); d.duplicates != 3 {
		t.Fatalf("%d duplicates in Kafka, want 3 (the rows whose DELETE never ran)", d.duplicates)
	}
}
