package hooks

import (
	"net/netip"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// ConnectBudget paces the CONNECTs one node handles, all clients together:
// a token bucket of Rate per second, and up to Queue CONNECTs waiting for
// their turn (each on its own connection's goroutine) before more are
// refused. A reconnect storm (a node restart, a cell-tower hand-over
// behind a carrier NAT) is then spread over a few seconds instead of
// hitting the database and the token verifier at once, and what the node
// cannot take within about Queue/Rate seconds is told to come back
// (CONNACK 0x9F) rather than left waiting, and when (comeBack).
type ConnectBudget struct {
	Rate  float64 // CONNECTs per second; <= 0: unlimited
	Queue int     // CONNECTs that may wait; 0: refuse when no token is left
}

// pacer is a ConnectBudget's bucket. Tokens go negative by one per waiting
// CONNECT: a CONNECT that finds -tokens others ahead of it waits until the
// bucket has refilled to its turn, so turns are handed out in arrival
// order at Rate.
type pacer struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	queue  float64
	tokens float64
	last   time.Time
	// promised counts the turns handed to refused CONNECTs as a time to
	// come back (comeBack) not yet due: it drains at rate, as the turns
	// pass.
	promised float64
}

// maxComeBack bounds the delay a refused CONNECT is told: beyond it a
// storm's stragglers all get the bound, as a client's own backoff caps
// at about a minute (docs/protocol.md).
const maxComeBack = 60 * time.Second

func newPacer(b ConnectBudget) *pacer {
	if b.Rate <= 0 {
		return nil
	}
	// A tenth of a second's worth at once: an idle node answers a handful
	// of CONNECTs without pacing them.
	burst := max(1, b.Rate/10)
	return &pacer{rate: b.Rate, burst: burst, queue: float64(max(0, b.Queue)), tokens: burst}
}

// reserve takes the next turn at now and says how long to wait for it, or
// ok = false when Queue CONNECTs are waiting already.
func (p *pacer) reserve(now time.Time) (wait time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if el := now.Sub(p.last).Seconds(); el > 0 {
		p.tokens = min(p.burst, p.tokens+el*p.rate)
		p.promised = max(0, p.promised-el*p.rate)
		p.last = now
	}
	if p.tokens-1 < -p.queue {
		return 0, false
	}
	p.tokens--
	if p.tokens >= 0 {
		return 0, true
	}
	return time.Duration(-p.tokens / p.rate * float64(time.Second)), true
}

// comeBack tells a refused CONNECT when to come back: the turn after the
// ones promised already, at rate. The refused of a storm are so spread
// over the seconds after it at the pace the budget admits them (10,000
// refused at once by a budget of 1,000/s come back over 10 s) instead of
// all returning together to be refused again.
func (p *pacer) comeBack() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.promised = min(p.promised+1, maxComeBack.Seconds()*p.rate)
	return time.Duration(p.promised / p.rate * float64(time.Second))
}

// awaitTurn charges the node's connect budget for one CONNECT, waiting for
// its turn; false means the queue is full and the CONNECT must be refused,
// to come back after retry when told (told: a v5 CONNACK can say it).
func (h *Chat) awaitTurn(told bool) (retry time.Duration, ok bool) {
	if h.budget == nil {
		return 0, true
	}
	wait, ok := h.budget.reserve(time.Now())
	if !ok {
		if told {
			retry = h.budget.comeBack()
		}
		return retry, false
	}
	if wait > 0 {
		h.cfg.Metrics.ConnectQueue.Inc()
		t := time.NewTimer(wait)
		<-t.C
		h.cfg.Metrics.ConnectQueue.Dec()
	}
	return 0, true
}

// clientIP is the address the connect limit is kept per: the IP address of
// the connection's remote end, as the listener's net.Conn reports it. A
// listener behind a load balancer that speaks the PROXY protocol hands
// mochi connections whose RemoteAddr is the client's own address, and this
// reads that one. An IPv6 address counts as its /64 (connectKey).
func clientIP(cl *mqtt.Client) string { return connectKey(remoteIP(cl.Net.Remote)) }

// connectKey is the key of ip's connect limit: an IPv4 address (or an
// IPv4-mapped IPv6 one) itself, an IPv6 address its /64 prefix. One host
// is handed a whole /64 (SLAAC, a VPS, a phone's mobile data) and can
// connect from any of its 2^64 addresses; keyed by address, the limit
// would not hold it back at all.
func connectKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return ip
	}
	return p.String()
}

// busyCode is the CONNACK of a CONNECT refused by a connect rate or the
// node's budget: 0x9F connection rate exceeded (v5), 0x03 server
// unavailable (3.1.1, which has no such code); both say "come back later".
func busyCode(cl *mqtt.Client) packets.Code {
	if isV5(cl) {
		return packets.ErrConnectionRateExceeded
	}
	return packets.ErrServerUnavailable
}
