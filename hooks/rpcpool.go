package hooks

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/chatd/chatd/internal/shutdown"
)

// rpcPool runs MQTT v5 requests (history pages, conversation lookups) on a
// fixed number of workers, off every connection's read loop. Its queue is
// bounded: a request that finds it full is refused at once (back-pressure
// the client sees) instead of piling up.
//
// Users take turns: each has a queue of their own, and the workers serve
// the users with requests waiting in rotation, running at most half of
// them for one user at a time; a user's requests queued or running are at
// most an eighth of the queue. The per-user request rate is taken only as
// a request runs, so without these one user's burst of requests that wait
// (a locked row, a slow query, each up to send_timeout) would fill the
// queue, have every other user of the node refused, and hold the workers
// while the others' requests waited their turn behind it.
//
// A user who already runs a request never takes the last idle worker: it
// is kept for a user with none running, whose request starts at once.
// Half of the workers each, two such users would otherwise hold them all,
// and another user's request would wait for one of theirs to end (up to
// send_timeout).
type rpcPool struct {
	perUser int // queued and running, per user
	perRun  int // running, per user
	queue   int // queued (not running), all users
	workers int
	busy    int // workers running a request

	wg     sync.WaitGroup
	mu     sync.Mutex
	cond   *sync.Cond
	users  map[int64]*rpcUser // users with requests queued or running
	ready  []int64            // users whose next request may run, in turn order
	queued int
	closed bool
}

// rpcUser is one user's requests in the pool.
type rpcUser struct {
	jobs    []func()
	running int
	ready   bool // in rpcPool.ready
}

// rpcShare is a user's share of a queue of that many requests.
func rpcShare(queue int) int { return max(4, queue/8) }

func newRPCPool(workers, queue int) *rpcPool {
	p := &rpcPool{perUser: rpcShare(queue), perRun: max(1, workers/2), queue: queue, workers: workers, users: map[int64]*rpcUser{}}
	p.cond = sync.NewCond(&p.mu)
	for range workers {
		p.wg.Go(p.work)
	}
	return p
}

// submit queues user's job and reports whether there was room, in the
// queue and in the user's share of it.
func (p *rpcPool) submit(user int64, job func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.users[user]
	switch {
	case p.closed, p.queued >= p.queue:
		return false
	case u == nil:
		u = &rpcUser{}
		p.users[user] = u
	case u.running+len(u.jobs) >= p.perUser:
		return false
	}
	u.jobs = append(u.jobs, job)
	p.queued++
	p.offer(user, u)
	return true
}

// offer puts user in turn if they have a request waiting that may run;
// p.mu is held.
func (p *rpcPool) offer(user int64, u *rpcUser) {
	if !u.ready && len(u.jobs) > 0 && u.running < p.perRun {
		u.ready = true
		p.ready = append(p.ready, user)
		p.cond.Signal()
	}
}

// next is the index in p.ready of the user whose request runs next: the
// first in turn who has none running, or who leaves a worker idle besides
// the one that would run it; -1 when there is none. p.mu is held.
func (p *rpcPool) next() int {
	for i, user := range p.ready {
		if p.users[user].running == 0 || p.busy+1 < p.workers {
			return i
		}
	}
	return -1
}

// work runs requests, the next user's in turn each time, until the pool
// is closed and nothing is queued.
func (p *rpcPool) work() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		i := p.next()
		for ; i < 0 && !(p.closed && p.queued == 0); i = p.next() {
			p.cond.Wait()
		}
		if i < 0 {
			p.cond.Broadcast() // the other workers end too
			return
		}
		user := p.ready[i]
		p.ready = slices.Delete(p.ready, i, i+1)
		u := p.users[user]
		u.ready = false
		job := u.jobs[0]
		u.jobs[0] = nil
		u.jobs = u.jobs[1:]
		p.queued--
		u.running++
		p.busy++
		p.offer(user, u) // their next one goes after everyone now in turn
		p.mu.Unlock()
		job()
		p.mu.Lock()
		p.busy--
		u.running--
		if u.running == 0 && len(u.jobs) == 0 {
			delete(p.users, user)
		} else {
			p.offer(user, u)
		}
		if p.closed && p.queued == 0 {
			p.cond.Broadcast()
		}
	}
}

// close stops taking requests and waits for the ones queued to finish.
func (p *rpcPool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	if err := shutdown.Wait(ctx, &p.wg); err != nil {
		return fmt.Errorf("wait for RPC workers: %w", err)
	}
	return nil
}
