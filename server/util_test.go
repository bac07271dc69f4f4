package server_test

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/store"
)

// subprocessEnv is the environment of a chatd test subprocess: the test
// secret, rate limits and presence pushes off (as startNode does in-process),
// the CI-sized send timeout, then extra ("KEY=value").
func subprocessEnv(extra ...string) []string {
	env := append(os.Environ(), "CHAT_JWT_SECRET="+testSecret, "CHAT_SEND_TIMEOUT=20s", "CHAT_PRESENCE_PUSH=false",
		"CHAT_LIMIT_SEND_RATE=0", "CHAT_LIMIT_CONV_RATE=0", "CHAT_LIMIT_CONNECT_RATE=0", "CHAT_LIMIT_API_RATE=0", "CHAT_LIMIT_READ_RATE=0",
		"CHAT_LIMIT_CONNECT_USER_RATE=0", "CHAT_MAX_CONNECTIONS_PER_USER=0", "CHAT_CONNECT_BUDGET_RATE=0")
	return append(env, extra...)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgembed.OpenPool(context.Background(), url, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func newStore(p *pgxpool.Pool) *store.Store { return store.New(p, chatLimits()) }

func chatLimits() chat.Limits { return chat.DefaultLimits() }
