package push

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
)

// DefaultLockKey is the session advisory lock that is the decider's lease.
const DefaultLockKey int64 = 0x636861745f707368 // "chat_psh"

// Config configures a Pusher; zero values take the defaults.
type Config struct {
	Pool   *pgxpool.Pool // required
	NodeID string

	Delay       time.Duration // unacknowledged this long: push (default 2s)
	MinInterval time.Duration // per (user, conversation) (default 10s)
	Preview     bool          // notifications carry the message text
	Timeout     time.Duration // one request to a push service (default 10s)
	QueueSize   int           // claimed pushes held in memory (default 1000)
	Workers     int           // concurrent pushes (default 32)
	// UserInFlight is how many of one user's pushes are sent at once
	// (claimed and leased, by any node; default 4): a user whose push
	// services hang holds no more workers than that.
	UserInFlight int

	VAPID        VAPIDKeys // required for Web Push
	VAPIDSubject string    // mailto: or https: contact (default mailto:push@localhost)

	// HTTPClient sends Web Push and webhook requests (default: one with
	// Timeout that follows no redirects and, unless AllowPrivate, connects
	// Web Push requests to public addresses only).
	HTTPClient *http.Client
	// AllowPrivate lets Web Push endpoints be on loopback, private and
	// link-local addresses. Off, a user cannot make chatd POST into the
	// operator's own network by registering such an endpoint.
	AllowPrivate bool

	KafkaBrokers []string // with KafkaTopic: FCM/APNs requests to Kafka
	KafkaTopic   string
	// EnsureKafkaTopic creates KafkaTopic, with the partitions the
	// operator's sender expects, if it does not exist: called before the
	// first write (again after a failure). Nil: the topic must exist; a
	// push to a missing one is retried. The writer never has the broker
	// create it (auto.create.topics.enable would, with its default
	// partition count, for good).
	EnsureKafkaTopic func(context.Context) error
	WebhookURL       string // FCM/APNs requests POSTed here
	WebhookSecret    string // signs them (X-Chat-Signature)

	Tick              time.Duration // decider and claimer poll (default 100ms)
	LeaseInterval     time.Duration // standby nodes try the lease this often (default 1s)
	ReconcileInterval time.Duration // the leader's full scan for missed messages (default 30s)
	LockKey           int64         // advisory lock key (default DefaultLockKey)
	MaxAttempts       int           // sends of one push before it is dropped (default 8)
	BackoffMin        time.Duration // first retry (default 1s)
	BackoffMax        time.Duration // longest retry pause (default 5m)
	MaxAge            time.Duration // older messages are never pushed (default 10m)

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// HandOff reports whether FCM and APNs devices can be delivered with cfg.
func (c Config) HandOff() bool {
	return (len(c.KafkaBrokers) > 0 && c.KafkaTopic != "") || c.WebhookURL != ""
}

// Pusher decides and sends pushes (doc.go). Publish is safe for concurrent
// use and never blocks; Run owns everything else.
type Pusher struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	running atomic.Bool
	kick    chan struct{} // new jobs were committed on this node

	mu      sync.Mutex
	hints   *hintQueue // conversation -> when its oldest undecided message is due
	leading bool

	out   *outputs
	backs *failedBacks
}

// maxHints bounds the in-memory hints; past it the next reconcile finds
// the rest.
const maxHints = 200000

// New returns a Pusher for cfg.
func New(cfg Config) (*Pusher, error) {
	if cfg.Pool == nil {
		return nil, errors.New("push: nil pool")
	}
	cfg.Delay = orDefault(cfg.Delay, 2*time.Second)
	cfg.MinInterval = orDefault(cfg.MinInterval, 10*time.Second)
	cfg.Timeout = orDefault(cfg.Timeout, 10*time.Second)
	cfg.QueueSize = orDefault(cfg.QueueSize, 1000)
	cfg.Workers = orDefault(cfg.Workers, 32)
	cfg.UserInFlight = orDefault(cfg.UserInFlight, 4)
	cfg.VAPIDSubject = orDefault(cfg.VAPIDSubject, "mailto:push@localhost")
	cfg.Tick = orDefault(cfg.Tick, 100*time.Millisecond)
	cfg.LeaseInterval = orDefault(cfg.LeaseInterval, time.Second)
	cfg.ReconcileInterval = orDefault(cfg.ReconcileInterval, 30*time.Second)
	cfg.LockKey = orDefault(cfg.LockKey, DefaultLockKey)
	cfg.MaxAttempts = orDefault(cfg.MaxAttempts, 8)
	cfg.BackoffMin = orDefault(cfg.BackoffMin, time.Second)
	cfg.BackoffMax = orDefault(cfg.BackoffMax, 5*time.Minute)
	cfg.MaxAge = orDefault(cfg.MaxAge, 10*time.Minute)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	webhookClient := cfg.HTTPClient
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = newHTTPClient(cfg.Timeout, !cfg.AllowPrivate)
		webhookClient = newHTTPClient(cfg.Timeout, false) // the operator's own address
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	p := &Pusher{cfg: cfg, log: cfg.Logger, m: m, kick: make(chan struct{}, 1), hints: newHintQueue()}
	p.out = newOutputs(cfg, webhookClient, p.log)
	p.backs = &failedBacks{lease: p.lease(), at: map[int64]time.Time{}}
	return p, nil
}

// Publish implements chat.Publisher: every committed message.new (this
// node's, or another's through Kafka) hints the decider that its
// conversation needs a decision after Delay, every message.recalled
// that it needs one now (a waiting push must not show the message, a
// shown one is to be removed), and with Preview every message.edited
// too (a shown preview of the message is to be updated). Other events
// are ignored.
func (p *Pusher) Publish(evs ...chat.Event) {
	var now time.Time
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leading {
		return
	}
	for i := range evs {
		ev := &evs[i]
		if ev.ConversationID == 0 {
			continue
		}
		var after time.Duration
		switch ev.Type {
		case chat.EventMessageNew:
			if p.hints.has(ev.ConversationID) {
				continue // due no later than this message
			}
			after = p.cfg.Delay
		case chat.EventMessageRecalled:
		case chat.EventMessageEdited:
			if !p.cfg.Preview {
				continue
			}
		default:
			continue
		}
		if !p.hints.has(ev.ConversationID) && p.hints.len() >= maxHints {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		p.hints.add(ev.ConversationID, now.Add(after))
	}
}

// hint asks for a decision of conversation id at due (earliest wins).
func (p *Pusher) hint(id int64, due time.Time) {
	p.mu.Lock()
	if p.hints.has(id) || p.hints.len() < maxHints {
		p.hints.add(id, due)
	}
	p.mu.Unlock()
}

// due takes up to n conversations whose decision is due.
func (p *Pusher) due(now time.Time, n int) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hints.take(now, n)
}

// anyDue reports whether a conversation may be due at now (a hint moved
// later since can make it answer true for nothing).
func (p *Pusher) anyDue(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hints.anyDue(now)
}

func (p *Pusher) setLeading(v bool) {
	p.mu.Lock()
	p.leading = v
	if !v {
		p.hints.clear()
	}
	p.mu.Unlock()
	if v {
		p.m.leader.Set(1)
	} else {
		p.m.leader.Set(0)
	}
}

func (p *Pusher) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run decides (while this node holds the lease) and sends (always) until
// ctx is cancelled; then it stops the sends in flight, records their
// outcome, hands unsent claims back and returns nil. It returns an error
// only when called twice.
func (p *Pusher) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("push: Run called twice")
	}
	defer p.out.close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.decide(ctx) }()
	go func() { defer wg.Done(); p.send(ctx) }()
	wg.Wait()
	p.log.Info("push: stopped")
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
