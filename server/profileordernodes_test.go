package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// Two profile changes of one user, A on node a and B on node b: A took
// its outbox id and its commit is held back (a trigger sleeps after the
// row's insert) while B starts, which waits for the profile's lock and
// so takes a higher id and commits after A. Both wait in the outbox for
// Kafka and are relayed in one batch: the clients of every node apply
// B last (a third node's gets A, if at all, before B, or again after
// it when Kafka hands the batch on again, then B again; node b's may get
// A after its own B, with the older updatedAt clients skip), and
// nothing is lost.
func TestTwoProfileChangesOfOneUserOnTwoNodesReachEveryNodeInCommitOrder(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs three chatd nodes and Kafka")
	}
	url := pgtest.NewDB(t)
	kafka, k, startLog := restartableKafka(t)
	env := func(id string) map[string]string {
		return map[string]string{"CHAT_KAFKA_BROKERS": kafka, "CHAT_NODE_ID": id}
	}
	a, b, c := startNode(t, url, env("porder-a")), startNode(t, url, env("porder-b")), startNode(t, url, env("porder-c"))
	const owner, onA, onB, onC = 1, 2, 3, 4
	mustGroup(t, context.Background(), a, owner, "profiles", []int64{onA, onB, onC})
	clients := map[string]*mqtttest.Client{
		"node a": rawClient(t, a.MQTTAddr(), onA, "porder-a", 5, true),
		"node b": rawClient(t, b.MQTTAddr(), onB, "porder-b", 5, true),
		"node c": rawClient(t, c.MQTTAddr(), onC, "porder-c", 5, true),
	}
	waitForConsumer(t, a, b, rawClient(t, b.MQTTAddr(), owner, "porder-warm-b", 5, true))
	waitForConsumer(t, a, c, rawClient(t, c.MQTTAddr(), owner, "porder-warm-c", 5, true))
	for _, q := range []string{
		`CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$`,
		`CREATE TRIGGER test_hold_commit AFTER INSERT ON outbox FOR EACH ROW
			WHEN (NEW.type = 'profile.updated' AND NEW.payload->>'displayName' = 'A') EXECUTE FUNCTION test_hold_commit()`,
	} {
		if _, err := a.Pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}

	k.Close()
	aDone := make(chan httpReply, 1)
	go func() { aDone <- request(t, a, owner, "PUT", "/v1/me", map[string]string{"displayName": "A"}, nil) }()
	testkit.WaitFor(t, 10*time.Second, "A's commit held after its outbox insert", func() bool {
		return pgtest.QueryOne[int](t, a.Pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`) == 1
	})
	if r := httpDo(t, b, owner, "PUT", "/v1/me", map[string]string{"displayName": "B"}); r.status != 200 {
		t.Fatalf("B on node b: %d %s", r.status, r.body)
	}
	if r := <-aDone; r.status != 200 {
		t.Fatalf("A on node a: %d %s", r.status, r.body)
	}
	ids := pgtest.QueryOne[[]int64](t, a.Pool, `SELECT array_agg(id ORDER BY id) FROM outbox WHERE type = 'profile.updated'`)
	names := pgtest.QueryOne[[]string](t, a.Pool, `SELECT array_agg(payload->>'displayName' ORDER BY id) FROM outbox WHERE type = 'profile.updated'`)
	t.Logf("outbox ids %v carry %v", ids, names)
	if !slices.Equal(names, []string{"A", "B"}) {
		t.Fatalf("outbox rows in id order carry %v, want A then B", names)
	}
	startLog()

	for name, cl := range clients {
		got := profileNames(t, cl, name, "B")
		t.Logf("%s: %v", name, got)
		if name == "node b" {
			continue // its own B first, then A, older: clients skip it by updatedAt
		}
		// Kafka may hand the batch on again after the restart (at least
		// once, from the committed offset: A then B again), and the
		// audience goroutine lets B replace an A still waiting, so an A
		// may follow a first B; what a client applies (newest updatedAt)
		// is B as long as B comes last.
		if got[len(got)-1] != "B" {
			t.Errorf("the client on %s got profile.updated %v, want B last", name, got)
		}
	}
}

// eventsUntilQuiet collects the events c gets until one that last
// accepts and a quiet second after it: events that are not entries may
// follow the entries committed after them (a session sends them once it
// has the entries before them), and a relayed one a node's own.
func eventsUntilQuiet(t *testing.T, c *mqtttest.Client, name string, last func(map[string]any) bool) []map[string]any {
	t.Helper()
	var got []map[string]any
	deadline := time.After(30 * time.Second)
	var quiet <-chan time.Time
	for {
		var pk packets.Packet
		select {
		case pk = <-c.Publishes:
		case <-deadline:
			t.Fatalf("the client on %s did not get the last event within 30 s (got %v)", name, got)
		case <-quiet:
			return got
		}
		var ev map[string]any
		if err := json.Unmarshal(pk.Payload, &ev); err != nil {
			t.Fatalf("bad event %q: %v", pk.Payload, err)
		}
		got = append(got, ev)
		if last(ev) {
			deadline, quiet = nil, time.After(time.Second)
		} else if quiet != nil {
			quiet = time.After(time.Second)
		}
	}
}

// profileNames is the display names of the profile.updated events c gets
// until one with last and a quiet second after it.
func profileNames(t *testing.T, c *mqtttest.Client, name, last string) []string {
	t.Helper()
	var got []string
	for _, ev := range eventsUntilQuiet(t, c, name, func(ev map[string]any) bool {
		return ev["type"] == chat.EventProfileUpdated && ev["displayName"] == last
	}) {
		if ev["type"] == chat.EventProfileUpdated {
			got = append(got, fmt.Sprint(ev["displayName"]))
		}
	}
	return got
}
