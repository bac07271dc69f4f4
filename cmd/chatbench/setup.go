package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/auth"
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
func (w *world) createConversations(ctx context.Context, httpBase string, workers int) error {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id, err := w.create(ctx, hc, httpBase, i)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				w.assign(i, id)
			}
		}()
	}
	for i := range w.convs {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.finish()
	return nil
}

func (w *world) create(ctx context.Context, hc *http.Client, base string, i int) (int64, error) {
	c := w.convs[i]
	owner := c.members[0]
	var url string
	var body []byte
	if c.direct {
		url = fmt.Sprintf("%s/v1/direct/%d", base, w.users[c.members[1]])
	} else {
		others := make([]int64, 0, len(c.members)-1)
		for _, m := range c.members[1:] {
			others = append(others, w.users[m])
		}
		body, _ = json.Marshal(map[string]any{"type": "group", "title": fmt.Sprintf("bench %d", i), "members": others})
		url = base + "/v1/conversations"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens[owner])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("create conversation: %w (is chatd's HTTP API at %s? set -http)", err, base)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("create conversation: %s %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	var conv struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(b, &conv); err != nil || conv.ID <= 0 {
		return 0, fmt.Errorf("create conversation: bad reply %q", b)
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
