package server_test

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"

	"github.com/chatd/chatd/store"
)

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
	p, err := store.OpenPool(context.Background(), url, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func newStore(p *pgxpool.Pool) *store.Store { return store.New(p, chatLimits()) }

func chatLimits() chat.Limits { return chat.DefaultLimits() }
