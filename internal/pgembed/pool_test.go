package pgembed_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
)

func TestPoolConnectionsRunWithoutJITUnlessTheURLAsksForIt(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	for _, c := range []struct{ url, want string }{{url, "off"}, {url + " jit=on", "on"}} {
		pool, err := pgembed.OpenPool(ctx, c.url, 1)
		if err != nil {
			t.Fatal(err)
		}
		var jit string
		err = pool.QueryRow(ctx, "SHOW jit").Scan(&jit)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if jit != c.want {
			t.Errorf("%q: jit = %s, want %s", c.url, jit, c.want)
		}
	}
}

// What the database URL says explicitly wins over chatd's defaults: its
// pool_max_conns used to be replaced by db_max_conns (default 32) and its
// connect_timeout lowered to 5 s.
func TestTheDatabaseURLsPoolSizeAndConnectTimeoutWinOverTheDefaults(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	for _, c := range []struct {
		url     string
		conns   int32
		timeout time.Duration
	}{
		{url, 32, 5 * time.Second},
		{url + " pool_max_conns=3 connect_timeout=20", 3, 20 * time.Second},
		{url + " connect_timeout=2", 32, 2 * time.Second},
	} {
		pool, err := pgembed.OpenPool(ctx, c.url, 32)
		if err != nil {
			t.Fatal(err)
		}
		cfg := pool.Config()
		pool.Close()
		if cfg.MaxConns != c.conns || cfg.ConnConfig.ConnectTimeout != c.timeout {
			t.Errorf("%q: pool size %d, connect timeout %v; want %d, %v", c.url, cfg.MaxConns, cfg.ConnConfig.ConnectTimeout, c.conns, c.timeout)
		}
	}
}

// A pool size set explicitly (db_max_conns from the environment) and a
// different one in the URL are refused, naming both, rather than one of
// them ignored in silence.
func TestAnExplicitPoolSizeThatDisagreesWithTheURLsIsRefused(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t) + " pool_max_conns=3"
	from := pgembed.WithMaxConnsFrom("db_max_conns from env CHAT_DB_MAX_CONNS")
	_, err := pgembed.OpenPool(ctx, url, 50, from)
	if err == nil || !strings.Contains(err.Error(), "pool_max_conns=3") || !strings.Contains(err.Error(), "50 of db_max_conns from env CHAT_DB_MAX_CONNS") {
		t.Fatalf("OpenPool with pool_max_conns=3 in the URL and 50 set explicitly: %v, want an error naming both", err)
	}
	pool, err := pgembed.OpenPool(ctx, url, 3, from)
	if err != nil {
		t.Fatalf("the same size in both: %v", err)
	}
	pool.Close()
}
