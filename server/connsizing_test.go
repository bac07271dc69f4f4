package server_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
)

// docs/operations.md and configs/chatd.yaml tell operators how many
// PostgreSQL connections a node opens beside its pool (db_max_conns), to
// size max_connections: "up to 8 more: 5 for group commit, one each for the
// notice watcher, the push decider's listener and, with Kafka, the relay's
// lease". A node also holds the claim of its node id on a session of its
// own (nodelock.go), which the count left out: a database sized by it
// refused the last node's connections ("too many clients").
func TestTheDocumentedConnectionsANodeOpensBesideItsPoolAreAllItOpens(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	startNode(t, url, map[string]string{"CHAT_KAFKA_BROKERS": startKafka(t), "CHAT_NODE_ID": "sizing"})
	pool := openPool(t, url)
	// The sessions a node opens outside its pool and the group-commit pool:
	// its relay's (leading or standing by), its push decider's, its notice
	// watcher's, and the one holding its node id (the advisory lock of
	// class "chnd").
	var dedicated int
	testkit.WaitFor(t, 20*time.Second, "the node's dedicated sessions", func() bool {
		if err := pool.QueryRow(context.Background(), `
SELECT count(DISTINCT pid) FROM (
    SELECT pid FROM pg_stat_activity
     WHERE datname = current_database() AND application_name IN ('chatd-relay', 'chatd-push', 'chatd-takeovers')
    UNION ALL
    SELECT pid FROM pg_locks
     WHERE locktype = 'advisory' AND granted AND classid = x'63686e64'::int::oid
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) s`).Scan(&dedicated); err != nil {
			t.Fatal(err)
		}
		return dedicated >= 4
	})
	const groupCommit = 5
	for _, doc := range []struct{ path, re string }{
		{filepath.Join("..", "docs", "operations.md"), `a node opens up to (\d+) connections more \(5 for group commit`},
		{filepath.Join("..", "configs", "chatd.yaml"), `A node opens up to this many plus (\d+) more: 5 for group commit`},
	} {
		raw, err := os.ReadFile(doc.path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(doc.re).FindSubmatch(raw)
		if m == nil {
			t.Fatalf("%s no longer says how many connections a node opens beside its pool (%s)", doc.path, doc.re)
		}
		said, _ := strconv.Atoi(string(m[1]))
		if groupCommit+dedicated > said {
			t.Errorf("%s: a node opens up to %d connections beside its pool, it says %d", doc.path, groupCommit+dedicated, said)
		}
	}
}
