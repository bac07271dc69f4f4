package hooks

import (
	"context"
	"fmt"
	"sync"

	"github.com/chatd/chatd/internal/shutdown"
)

// rpcPool runs MQTT v5 requests (history pages, conversation lookups) on a
// fixed number of workers, off every connection's read loop. Its queue is
// bounded: a request that finds it full is refused at once (back-pressure
// the client sees) instead of piling up. So is each user's share of it
// (perUser requests queued or running): the per-user request rate is
// taken as a request runs, and one user's burst on requests that wait
// (a locked row, a slow query) must not fill the queue and have every
// other user of the node refused.
type rpcPool struct {
	jobs    chan func()
	wg      sync.WaitGroup
	mu      sync.RWMutex
	closed  bool
	perUser int

	usersMu sync.Mutex
	users   map[int64]int // requests queued or running, by user
}

// rpcShare is a user's share of a queue of that many requests.
func rpcShare(queue int) int { return max(4, queue/8) }

func newRPCPool(workers, queue int) *rpcPool {
	p := &rpcPool{jobs: make(chan func(), queue), perUser: rpcShare(queue), users: map[int64]int{}}
	for range workers {
		p.wg.Go(func() {
			for job := range p.jobs {
				job()
			}
		})
	}
	return p
}

// submit queues user's job and reports whether there was room, in the
// queue and in the user's share of it.
func (p *rpcPool) submit(user int64, job func()) bool {
	if !p.take(user) {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.closed {
		select {
		case p.jobs <- func() { defer p.done(user); job() }:
			return true
		default:
		}
	}
	p.done(user)
	return false
}

// take counts one more request of user's, unless their share is taken.
func (p *rpcPool) take(user int64) bool {
	p.usersMu.Lock()
	defer p.usersMu.Unlock()
	if p.users[user] >= p.perUser {
		return false
	}
	p.users[user]++
	return true
}

// done counts one request of user's less.
func (p *rpcPool) done(user int64) {
	p.usersMu.Lock()
	defer p.usersMu.Unlock()
	if p.users[user]--; p.users[user] <= 0 {
		delete(p.users, user)
	}
}

// close stops taking requests and waits for the ones queued to finish.
func (p *rpcPool) close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.jobs)
	}
	p.mu.Unlock()
	if err := shutdown.Wait(ctx, &p.wg); err != nil {
		return fmt.Errorf("wait for RPC workers: %w", err)
	}
	return nil
}
