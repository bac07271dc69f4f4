package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/server"
)

// Messages typed while offline are stored in the order they were typed,
// in each conversation, whether the connection comes back in the same
// process or the app restarts with its SessionDir: a reader sees them as
// the writer wrote them. (Each send waiting for the connection on its own
// and all published at once when it returned, they were stored in any
// order.)
func TestSendsQueuedWhileOfflineAreStoredInTheOrderTheyWereQueued(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			srv, broker := nodeOn(t, pgtest.NewDB(t))
			a := connect(t, testConfig(t, broker, 1))
			conv := direct(t, a, 2)
			other := direct(t, a, 3)
			c, px, cfg := offlineClient(t, srv)
			const n = 20
			for i := range n {
				for _, id := range []int64{conv, other} {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					_, err := c.Send(ctx, id, fmt.Sprint("typed offline ", i))
					cancel()
					if !errors.Is(err, client.ErrQueued) {
						t.Fatalf("send %d while offline: %v, want ErrQueued", i, err)
					}
				}
			}
			if restart {
				closeClient(t, c)
				px.Resume()
				c = connect(t, cfg)
			} else {
				px.Resume()
			}
			resumed := time.Now()
			testkit.WaitFor(t, 30*time.Second, "the queued messages to be stored", func() bool { return len(c.Pending()) == 0 })
			t.Logf("%d queued messages stored %v after the connection came back", 2*n, time.Since(resumed))
			for _, id := range []int64{conv, other} {
				page, err := a.History(ctxFor(t, 10*time.Second), id, client.HistoryOptions{Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, m := range page {
					got = append(got, m.Body)
				}
				if len(got) != n {
					t.Fatalf("conversation %d holds %d messages, want %d: %q", id, len(got), n, got)
				}
				for i, b := range got {
					if b != fmt.Sprint("typed offline ", i) {
						t.Fatalf("conversation %d stored the offline messages as %q", id, got)
					}
				}
			}
		})
	}
}

// A change too large for the send journal's line (16 MiB) is refused at
// once, never recorded: recorded while offline, it made every later New on
// that SessionDir fail to read the journal, so the app could not start its
// client again.
func TestAChangeTooLargeForTheJournalIsRefusedAndTheSessionDirStaysUsable(t *testing.T) {
	t.Parallel()
	srv, _ := nodeOn(t, pgtest.NewDB(t))
	c, px, cfg := offlineClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.Send(ctx, 1, strings.Repeat("<", 3<<20)) // 18 MiB as JSON
	cancel()
	if !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("send of a body too large for the journal: %v, want ErrInvalid (too_large)", err)
	}
	closeClient(t, c)
	px.Resume()
	again, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New on the same SessionDir: %v", err)
	}
	closeClient(t, again)
}

// offlineClient connects user 1 with a SessionDir (in cfg) through a
// proxy to srv and cuts the proxy: the client is offline when it returns.
func offlineClient(t *testing.T, srv *server.Server) (c *client.Client, px *proxy, cfg client.Config) {
	t.Helper()
	px = newProxy(t, srv.MQTTAddr())
	cfg = testConfig(t, px.URL(), 1)
	cfg.SessionDir = t.TempDir()
	c = connect(t, cfg)
	px.Cut()
	testkit.WaitFor(t, 10*time.Second, "the client to go offline", func() bool { return !c.Connected() })
	return c, px, cfg
}

// Sends a previous run queued are stored after a restart in the order
// they were queued, which is the journal's order, whatever their clocks
// said: a wall clock stepped back between two sends (NTP, a phone's time
// set by hand) made the later one look older, and it was stored first.
func TestSendsQueuedAcrossAClockStepBackAreStoredInTheOrderTheyWereQueued(t *testing.T) {
	t.Parallel()
	srv, broker := nodeOn(t, pgtest.NewDB(t))
	a := connect(t, testConfig(t, broker, 1))
	conv := direct(t, a, 2)
	cfg := testConfig(t, "mqtt://"+srv.MQTTAddr(), 1)
	cfg.SessionDir = t.TempDir()
	// The journal a crashed run left: "first", then "second" queued after
	// the clock went back a minute.
	at := time.Now().UTC()
	var journal []byte
	for _, s := range []struct {
		body string
		at   time.Time
	}{{"first", at}, {"second", at.Add(-time.Minute)}} {
		line, err := json.Marshal(map[string]any{"op": "send", "id": uuid.NewString(), "conv": conv, "body": s.body, "at": s.at})
		if err != nil {
			t.Fatal(err)
		}
		journal = append(append(journal, line...), '\n')
	}
	if err := os.WriteFile(filepath.Join(cfg.SessionDir, "pending.jsonl"), journal, 0o600); err != nil {
		t.Fatal(err)
	}
	c := connect(t, cfg)
	testkit.WaitFor(t, 20*time.Second, "the journal's messages to be stored", func() bool { return len(c.Pending()) == 0 })
	page, err := a.History(ctxFor(t, 10*time.Second), conv, client.HistoryOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page {
		got = append(got, m.Body)
	}
	if len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("stored %q, want [first second]: the order they were queued", got)
	}
}
