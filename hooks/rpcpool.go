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
// the client sees) instead of piling up.
type rpcPool struct {
	jobs   chan func()
	wg     sync.WaitGroup
	mu     sync.RWMutex
	closed bool
}

func newRPCPool(workers, queue int) *rpcPool {
	p := &rpcPool{jobs: make(chan func(), queue)}
	for range workers {
		p.wg.Go(func() {
			for job := range p.jobs {
				job()
			}
		})
	}
	return p
}

// submit queues job and reports whether there was room.
func (p *rpcPool) submit(job func()) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return false
	}
	select {
	case p.jobs <- job:
		return true
	default:
		return false
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
