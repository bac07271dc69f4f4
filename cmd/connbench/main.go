package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chatd/chatd/internal/benchmqtt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := parseOptions(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, errHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(2)
	}
	rep, err := run(ctx, o, os.Stderr)
	if rep != nil {
		if o.jsonOut {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			rep.print(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(1)
	}
	if !rep.OK {
		os.Exit(1)
	}
}

// bench is one run: the clients and what they received.
type bench struct {
	o              *options
	clients        []*client
	log            io.Writer
	mem            *memSampler
	pub            *benchmqtt.Conn // plain: publishes the offline messages
	tokens         []string        // chatd: per client
	baseGoroutines float64         // the server's, before the first connection
	retries        atomic.Int64    // connect attempts repeated
	lat            latencies       // of the current paced step
}

// client is one persistent session. got has bit n set once the message
// with seq n of its pair's conversation arrived; dups counts repeats.
type client struct {
	idx    int
	user   int64
	pair   int
	conv   int64 // chatd: the pair's direct conversation
	source string
	conn   benchmqtt.Slot
	got    atomic.Uint32
	dups   atomic.Int32
	other  atomic.Int64 // other events (presence, receipts)
}

func run(ctx context.Context, o *options, log io.Writer) (*Report, error) {
	b := &bench{o: o, log: log}
	for i := range o.clients {
		b.clients = append(b.clients, &client{idx: i, user: o.userBase + int64(i), pair: i / 2, source: o.sources[i%len(o.sources)]})
	}
	rep := &Report{Target: o.target(), Clients: o.clients, ConnectRate: o.connectRate, Sources: len(o.sources)}
	defer b.closeAll()
	if !o.plain {
		fmt.Fprintf(log, "connbench: creating %d direct conversations ...\n", o.clients/2)
		t0 := time.Now()
		if err := b.setupChat(ctx); err != nil {
			return nil, fmt.Errorf("set up: %w", err)
		}
		rep.SetupSeconds = time.Since(t0).Seconds()
	} else {
		pub, _, err := benchmqtt.Dial(o.Broker, benchmqtt.Options{Version: 5, ClientID: fmt.Sprintf("connbench-pub-%d", o.userBase), CleanStart: true, KeepAlive: 300})
		if err != nil {
			return nil, fmt.Errorf("connect the publisher: %w", err)
		}
		b.pub = pub
	}
	var err error
	if b.mem, err = newMemSampler(o); err != nil {
		return nil, err
	}
	steps := []struct {
		name, what string
		do         func(context.Context) (string, error)
	}{
		{"baseline", "no sessions", nil},
		{"connect", "all connect and subscribe (online, idle)", b.connectAll},
		{"message", "each gets one message (online, idle)", b.messageOnline},
		{"disconnect", "all disconnect (offline sessions)", b.disconnectAll},
		{"park", "a second device of each connects and disconnects (2 offline sessions each)", b.parkMore},
		{"owed", "each is owed one message (offline)", b.messageOffline},
		{"resume", "all resume and get it (online, idle)", b.resumeAll},
	}
	rep.OK = true
	var base Mem
	for _, st := range steps {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		res := Step{Name: st.name, What: st.what, OK: true}
		if st.do != nil {
			fmt.Fprintf(log, "connbench: %s: %s ...\n", st.name, st.what)
			sctx, cancel := context.WithTimeout(ctx, o.stepTimeout)
			t0 := time.Now()
			detail, err := st.do(sctx)
			cancel()
			res.Seconds = time.Since(t0).Seconds()
			res.Detail = detail
			if err != nil {
				res.OK, res.Error = false, err.Error()
				rep.OK = false
			}
		}
		res.Mem = b.mem.sample(ctx, st.name)
		switch st.name {
		case "baseline":
			base = res.Mem
			b.baseGoroutines = base.Goroutines
		case "park":
			// What one more offline session costs: this step less the
			// first disconnect.
			prev := rep.Steps[len(rep.Steps)-1].Mem
			res.PerClient = res.Mem.perClient(prev, o.clients)
			res.PerClientOf = "the step before"
		default:
			res.PerClient = res.Mem.perClient(base, o.clients)
		}
		rep.Steps = append(rep.Steps, res)
		if !res.OK {
			break
		}
	}
	rep.Lost, rep.Duplicates = b.tally()
	rep.OK = rep.OK && rep.Lost == 0
	return rep, nil
}

// tally counts the clients missing a message they were owed by the steps
// run so far, and the duplicates.
func (b *bench) tally() (lost, dups int64) {
	for _, c := range b.clients {
		dups += int64(c.dups.Load())
	}
	return b.missing(), dups
}

// owedMask is the seqs every client was owed after the steps run so far.
var owedMask atomic.Uint32

func (b *bench) missing() int64 {
	want := owedMask.Load()
	var n int64
	for _, c := range b.clients {
		if c.got.Load()&want != want {
			n++
		}
	}
	return n
}

// waitAll waits until every client holds the messages owed, or ctx ends.
func (b *bench) waitAll(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		n := b.missing()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d clients still missing a message after the step's time", n)
		case <-t.C:
		}
	}
}

func (b *bench) closeAll() {
	var wg sync.WaitGroup
	for _, c := range b.clients {
		if conn := c.conn.Take(); conn != nil {
			wg.Go(conn.Drop)
		}
	}
	if b.pub != nil {
		b.pub.Drop()
	}
	wg.Wait()
}
