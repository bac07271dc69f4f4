package pgtest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/chatd/chatd/store"
)

// Vanishing is a migrated database on a PostgreSQL of its own on TCP
// (TCPPool), reached through a proxy whose far end can vanish: whatever
// either end sends is then dropped and no reset ever comes, as when the
// database's host crashes or the network is cut.
type Vanishing struct {
	Direct *pgxpool.Pool   // to the server itself, never cut
	Config *pgx.ConnConfig // through the proxy
	Pool   *pgxpool.Pool   // through the proxy
	proxy  *toxiproxy.Proxy
}

// NewVanishing starts the server, migrates its database and puts the
// proxy in front of it.
func NewVanishing(t testing.TB) *Vanishing {
	t.Helper()
	direct := TCPPool(t)
	if _, err := store.Migrate(context.Background(), direct); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxics log through zerolog's global logger
	cc := direct.Config().ConnConfig
	proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		"pg", "127.0.0.1:0", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	if err := proxy.Start(); err != nil {
		t.Fatalf("start the proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	host, port, _ := net.SplitHostPort(proxy.Listen)
	pc, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable", host, port, cc.User, cc.Database))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &Vanishing{Direct: direct, Config: pc.ConnConfig.Copy(), Pool: pool, proxy: proxy}
}

// Vanish drops all that either end sends from now on, on the sessions
// open and those opened after.
func (v *Vanishing) Vanish(t testing.TB) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"gone-%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := v.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("vanish: %v", err)
		}
	}
}

// Return lets what either end sends through again; what was dropped
// stays lost.
func (v *Vanishing) Return(t testing.TB) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		if err := v.proxy.Toxics.RemoveToxic(context.Background(), "gone-"+stream); err != nil {
			t.Fatalf("return: %v", err)
		}
	}
}
