package hooks

import (
	"sync"
	"unsafe"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/chatd/chatd/internal/shrink"
)

// clientShards spreads the index's lookups, made for every packet, over
// locks of their own.
const clientShards = 32

// clientIndex is the hook's record of its clients (clientInfo by mochi's
// client). An entry of a sync.Map is a few heap objects of its own (~130
// bytes), one of a map a slot in its table (~20 bytes), and there is one
// per connection.
type clientIndex struct {
	shards [clientShards]clientShard
}

type clientShard struct {
	mu   sync.RWMutex
	m    map[*mqtt.Client]*clientInfo
	peak int // shrink.Map's
	_    [64]byte
}

func (x *clientIndex) shard(cl *mqtt.Client) *clientShard {
	// Fibonacci hashing of the address: clients are allocated a fixed
	// size apart, which its low bits alone would spread badly.
	p := uint64(uintptr(unsafe.Pointer(cl)))
	return &x.shards[(p*0x9E3779B97F4A7C15)>>(64-5)]
}

func (x *clientIndex) Load(cl *mqtt.Client) (*clientInfo, bool) {
	s := x.shard(cl)
	s.mu.RLock()
	ci, ok := s.m[cl]
	s.mu.RUnlock()
	return ci, ok
}

func (x *clientIndex) Store(cl *mqtt.Client, ci *clientInfo) {
	s := x.shard(cl)
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*mqtt.Client]*clientInfo{}
	}
	s.m[cl] = ci
	s.m = shrink.Map(s.m, &s.peak)
	s.mu.Unlock()
}

func (x *clientIndex) Delete(cl *mqtt.Client) {
	s := x.shard(cl)
	s.mu.Lock()
	if _, ok := s.m[cl]; ok {
		delete(s.m, cl)
		s.m = shrink.Map(s.m, &s.peak)
	}
	s.mu.Unlock()
}

// Range calls f for each client until it returns false, as sync.Map's
// does: f may store and delete meanwhile (each shard is listed before f
// sees its clients).
func (x *clientIndex) Range(f func(*mqtt.Client, *clientInfo) bool) {
	type entry struct {
		cl *mqtt.Client
		ci *clientInfo
	}
	var list []entry
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		list = list[:0]
		for cl, ci := range s.m {
			list = append(list, entry{cl, ci})
		}
		s.mu.RUnlock()
		for _, e := range list {
			if !f(e.cl, e.ci) {
				return
			}
		}
	}
}
