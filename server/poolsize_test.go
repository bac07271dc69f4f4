package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// The database URL's pool_max_conns sizes the pool unless db_max_conns is
// set too, to another size: then the node refuses to start, naming both.
// db_max_conns (default 32) used to replace it in silence.
func TestTheDatabaseURLsPoolSizeWinsAndAConflictingDBMaxConnsIsRefused(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t) + " pool_max_conns=3"
	env := nodeEnv(t, url, nil)
	env["CHAT_DB_MAX_CONNS"] = "50"
	st, err := config.Load(nil, config.MapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	if srv, err := server.Start(context.Background(), st, slog.New(slog.NewTextHandler(&logs, nil))); err == nil {
		closeNode(t, srv)
		t.Fatal("a node started with pool_max_conns=3 in its URL and CHAT_DB_MAX_CONNS=50")
	} else if !strings.Contains(err.Error(), "pool_max_conns=3") || !strings.Contains(err.Error(), "env CHAT_DB_MAX_CONNS") {
		t.Fatalf("start: %v, want an error naming pool_max_conns=3 and CHAT_DB_MAX_CONNS", err)
	}

	srv := startNode(t, url, nil)
	if n := srv.Pool.Config().MaxConns; n != 3 {
		t.Errorf("pool size %d, want the URL's 3", n)
	}
}
