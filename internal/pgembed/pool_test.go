package pgembed_test

import (
	"context"
	"testing"

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
