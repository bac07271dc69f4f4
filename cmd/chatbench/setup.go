package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/benchtarget"
)

// world is the bench's users and conversations.
type world struct {
	users   []int64           // client i acts as users[i]
	index   map[int64]int32   // user -> client index
	convs   []conversation    // all conversations
	byUser  [][]int           // client index -> indexes into convs
	tokens  []string          // per client (chat mode)
	members map[int64][]int32 // conversation id -> client indexes
}

type conversation struct {
	id      int64
	direct  bool
	members []int32 // client indexes, owner first
}

// plan draws the conversations: a fraction direct between random pairs
// (each pair at most once), the rest groups of group-min..group-max
// members. Deterministic for a seed.
func plan(o *options) *world {
	rng := rand.New(rand.NewPCG(o.seed, 0x63686174))
	w := &world{index: map[int64]int32{}, members: map[int64][]int32{}}
	for i := range o.clients {
		u := o.userBase + int64(i)
		w.users = append(w.users, u)
		w.index[u] = int32(i)
	}
	w.byUser = make([][]int, o.clients)
	pairs := map[[2]int32]bool{}
	maxPairs := o.clients * (o.clients - 1) / 2
	for len(w.convs) < o.conversations {
		var c conversation
		if rng.Float64() < o.direct && len(pairs) < maxPairs {
			a, b := int32(rng.IntN(o.clients)), int32(rng.IntN(o.clients))
			if a == b {
				continue
			}
			key := [2]int32{min(a, b), max(a, b)}
			if pairs[key] {
				continue
			}
			pairs[key] = true
			c = conversation{direct: true, members: []int32{a, b}}
		} else {
			n := o.groupMin + rng.IntN(o.groupMax-o.groupMin+1)
			n = min(n, o.clients)
			perm := rng.Perm(o.clients)[:n]
			for _, p := range perm {
				c.members = append(c.members, int32(p))
			}
		}
		w.convs = append(w.convs, c)
	}
	return w
}

// assign records conversation i's id once known.
func (w *world) assign(i int, id int64) {
	w.convs[i].id = id
}

// index builds the lookups after every conversation has its id.
func (w *world) finish() {
	for i, c := range w.convs {
		w.members[c.id] = c.members
		for _, m := range c.members {
			w.byUser[m] = append(w.byUser[m], i)
		}
	}
}

// mintTokens signs a token per user with chatd's secret.
func (w *world) mintTokens(secret []byte, ttl time.Duration) error {
	w.tokens = make([]string, len(w.users))
	for i, u := range w.users {
		tok, err := auth.Mint(secret, u, ttl)
		if err != nil {
			return fmt.Errorf("mint token: %w", err)
		}
		w.tokens[i] = tok
	}
	return nil
}

// createConversations creates every conversation through chatd's HTTP API
// (POST /v1/direct/{peer}, POST /v1/conversations), workers at a time.
func (w *world) createConversations(ctx context.Context, t *benchtarget.Target, workers int) error {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range w.convs {
		if gctx.Err() != nil {
			break // a create failed, or ctx ended
		}
		g.Go(func() error {
			id, err := w.create(ctx, hc, t, i)
			if err != nil {
				return err
			}
			w.assign(i, id)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.finish()
	return nil
}

func (w *world) create(ctx context.Context, hc *http.Client, t *benchtarget.Target, i int) (int64, error) {
	c := w.convs[i]
	owner := c.members[0]
	var path string
	var body any
	if c.direct {
		path = fmt.Sprintf("/v1/direct/%d", w.users[c.members[1]])
	} else {
		others := make([]int64, 0, len(c.members)-1)
		for _, m := range c.members[1:] {
			others = append(others, w.users[m])
		}
		path, body = "/v1/conversations", map[string]any{"type": "group", "title": fmt.Sprintf("bench %d", i), "members": others}
	}
	var conv struct {
		ID int64 `json:"id"`
	}
	if err := t.Call(ctx, hc, w.tokens[owner], http.MethodPost, path, body, &conv); err != nil {
		return 0, fmt.Errorf("create conversation: %w", err)
	}
	if conv.ID <= 0 {
		return 0, fmt.Errorf("create conversation: no id in the reply")
	}
	return conv.ID, nil
}

// synthesize numbers the conversations 1..n (plain mode: no server state).
func (w *world) synthesize() {
	for i := range w.convs {
		w.assign(i, int64(i+1))
	}
	w.finish()
}

// stats describes the world for the report.
func (w *world) stats() (direct, groups int, avgMembers float64) {
	total := 0
	for _, c := range w.convs {
		if c.direct {
			direct++
		} else {
			groups++
		}
		total += len(c.members)
	}
	if len(w.convs) > 0 {
		avgMembers = float64(total) / float64(len(w.convs))
	}
	return direct, groups, avgMembers
}
