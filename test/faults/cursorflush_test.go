package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAKilledChatdReplaysOnlyWhatWasAcknowledgedWithinTheCursorFlush: with
// the default cursor_flush, a persistent session's acknowledgements are in
// PostgreSQL one interval later; chatd SIGKILLed (no clean Close, so no
// final flush) right after the session acknowledged more messages sends
// the session again only what came after the last flush (duplicates the
// client drops by seq), and every message arrives.
func TestAKilledChatdReplaysOnlyWhatWasAcknowledgedWithinTheCursorFlush(t *testing.T) {
	defaults, err := config.Load(nil, config.MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	interval := defaults.CursorFlush
	url := pgtest.NewDB(t)
	pool := openPool(t, url, 2)
	conv := mustGroup(t, newService(pool), "cursor flush", []int64{2}).ID
	p := newProc(t, url, nil) // cursor_flush not set: the default
	p.start()
	addr := func() string { return p.MQTT }

	const clientID = "flush-phone-2"
	phone := newApp("user 2 (v5)")
	keepConnected(t, device{user: 2, clientID: clientID, version: 5}, phone, addr)
	snd := newSender(device{user: 1, clientID: "flush-sender-1", version: 5}, addr, newLedger())
	var last int64
	send := func(n int) {
		t.Helper()
		for range n {
			seq, err := snd.send(t, conv, newID(), "m", time.Now().Add(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			last = seq
		}
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("the phone to receive seq %d", last), func() bool { return phone.position(conv) >= last })
	}
	cursor := func() (seq int64) {
		_ = pool.QueryRow(context.Background(), `SELECT delivered_seq FROM session_cursor WHERE client_id = $1 AND conversation_id = $2`,
			clientID, conv).Scan(&seq)
		return seq
	}

	send(5)
	flushedBy := time.Now().Add(interval + 2*time.Second) // the interval, and slack for a loaded machine
	first := last
	for cursor() < first {
		if time.Now().After(flushedBy) {
			t.Fatalf("cursor %d, not at %d %v after the phone acknowledged it (cursor_flush %v)", cursor(), first, time.Since(flushedBy.Add(-interval-2*time.Second)), interval)
		}
		time.Sleep(20 * time.Millisecond)
	}

	send(5)
	p.kill()
	atKill := cursor()
	if atKill < first {
		t.Fatalf("cursor went back to %d from %d", atKill, first)
	}
	p.start()
	send(1) // in seq order: once it arrives, every replay came before it

	phone.assertExact(t, map[int64]int64{conv: last})
	phone.mu.Lock()
	dups := phone.dups
	phone.mu.Unlock()
	if unflushed := last - 1 - atKill; int64(dups) > unflushed {
		t.Errorf("%d duplicates after the kill, more than the %d messages acknowledged after the last cursor flush (cursor %d)", dups, unflushed, atKill)
	}
	t.Logf("cursor_flush %v: cursor %d of %d at the kill, %d acknowledged messages sent again, none lost", interval, atKill, last-1, dups)
}
