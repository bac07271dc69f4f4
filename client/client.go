package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"
	"github.com/eclipse/paho.golang/paho/store/file"
)

// Client is a connection to chatd for one user. Its methods are safe for
// concurrent use. See the package documentation for the guarantees.
type Client struct {
	cfg *settings
	// cm is set by New once autopaho returns it, and by onUp (the same
	// manager) so that anything that found a connection ready sees it even
	// while New has not returned yet. Use manager(), or connState.cm.
	cm      atomic.Pointer[autopaho.ConnectionManager]
	session *state.State // paho's packet store (on disk with SessionDir)
	journal *journal
	lock    *os.File // flock on the session dir
	disp    *dispatcher
	reads   *readBatcher
	rpc     rpcTable
	stats   counters
	// told is the wait (ns) the last refusing CONNACK asked for, until
	// the next reconnectBackoff takes it.
	told atomic.Int64
	// takenOver is set when chatd ends the connection with DISCONNECT
	// 0x8E (another connection took the session over), for onDown.
	takenOver atomic.Bool

	eventsTopic string
	rpcTopic    string

	life context.Context // ends at Close
	stop context.CancelFunc
	// connStop ends the connection manager before Close: once a static
	// Token was refused, reconnecting with it could never succeed; once
	// another client took the client id, it would only take it back.
	connStop context.CancelFunc
	workers  sync.WaitGroup

	mu      sync.Mutex    // guards the fields below
	conn    *connState    // nil while down
	changed chan struct{} // closed and replaced on every state change
	lastErr error         // last connection failure
	// stopped is set once chatd refused a static Token or the client id,
	// or another client took the session over takeoverLimit times: the
	// client stops reconnecting, and everything that needs a connection
	// fails with it.
	stopped error
	// takeovers are the times of the recent takeovers (takeoverWindow).
	takeovers []time.Time
	sends     map[string]*sendOp // running sends by clientMsgId
	// tails is each conversation's last send started: the next one
	// waits for it to settle, so a conversation's sends are stored in
	// the order they were queued.
	tails  map[int64]*sendOp
	closed bool

	closeOnce sync.Once
	closeErr  error

	// dropEvent, when set (tests), drops matching events-topic payloads as
	// a lossy network would.
	dropEvent atomic.Pointer[func([]byte) bool]
	// dropReply, when set (tests), drops matching RPC replies as a
	// connection that ended before them would.
	dropReply atomic.Pointer[func([]byte) bool]
	// ackHook, when set (tests), rewrites the PUBACK of a send as a server
	// that strips properties would.
	ackHook atomic.Pointer[func(*paho.PublishResponse) *paho.PublishResponse]
	// historyHook, when set (tests), answers the dispatcher's history
	// calls instead of chatd.
	historyHook atomic.Pointer[func(conv int64, o HistoryOptions) ([]Message, error)]
	// catchUpHook, when set (tests), runs once a persistent session's
	// catch-up has applied its inbox read, before it fills anything.
	catchUpHook atomic.Pointer[func()]
	// subscribedHook, when set (tests), runs once a connection's
	// subscriptions are acknowledged, before its catch-up is queued.
	subscribedHook atomic.Pointer[func()]
	// handedHook, when set (tests), runs after each event is put on
	// Events, on the dispatcher's goroutine.
	handedHook atomic.Pointer[func(Event)]

	httpOnce sync.Once
	httpc    *http.Client // uploads and downloads (attachments.go)
}

// connState is one MQTT connection: ctx ends when it goes down; ready is
// closed once the events and RPC subscriptions are in place.
type connState struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{}
	cm     *autopaho.ConnectionManager // the manager that reported it up
	// maxPacket is the largest packet the server accepts (its CONNACK's
	// Maximum Packet Size; 0: no limit).
	maxPacket uint32
}

// tooLarge refuses a publish larger than the server of cs accepts: MQTT 5
// forbids sending it (MQTT-3.1.2-24) and chatd drops the connection of a
// client that does, so re-publishing it could never succeed.
func (cs *connState) tooLarge(op string, pb *paho.Publish) *Error {
	if cs.maxPacket == 0 {
		return nil
	}
	n, err := pb.Packet().WriteTo(io.Discard)
	if err != nil || n <= int64(cs.maxPacket) {
		return nil
	}
	return &Error{Op: op, Code: "too_large", Reason: 0x95,
		Message: fmt.Sprintf("the publish is %d bytes; chatd accepts packets of at most %d", n, cs.maxPacket)}
}

// Stats are counters since New, for monitoring and tests.
type Stats struct {
	Connects       int64 // connections established
	Delivered      int64 // events handed to the application
	Duplicates     int64 // message.new events dropped as already delivered
	Filled         int64 // messages fetched through history to close gaps
	GapFills       int64 // history fills run (gap or reconnect)
	Resends        int64 // send publishes after the first, same clientMsgId
	ReadsPublished int64 // read receipts published
}

type counters struct {
	connects, delivered, duplicates, filled, gapFills, resends, reads atomic.Int64
}

// New starts a client: it connects in the background (retrying with
// backoff), subscribes to the user's events, resends what SessionDir holds
// unacknowledged and starts delivering events. Use AwaitConnection to wait
// for the first connection. ctx bounds only the setup; Close ends the client.
func New(ctx context.Context, cfg Config) (*Client, error) {
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:         s,
		eventsTopic: fmt.Sprintf("chat/v1/user/%d/events", s.UserID),
		rpcTopic:    fmt.Sprintf("chat/v1/user/%d/rpc/%s", s.UserID, s.ClientID),
		changed:     make(chan struct{}),
		sends:       map[string]*sendOp{},
		tails:       map[int64]*sendOp{},
	}
	c.rpc.init()
	c.life, c.stop = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			c.stop()
			if c.lock != nil {
				c.lock.Close()
			}
		}
	}()
	if err := c.openSession(); err != nil {
		return nil, err
	}
	c.disp = newDispatcher(c, s.Positions, s.EventBuffer)
	c.reads = newReadBatcher(c, s.ReadDebounce)

	ttl := uint32(0)
	if s.persistent {
		ttl = uint32(s.SessionExpiry / time.Second)
	}
	acfg := autopaho.ClientConfig{
		ServerUrls:                    s.brokers,
		TlsCfg:                        s.TLS,
		KeepAlive:                     uint16(min(s.KeepAlive/time.Second, 65535)),
		CleanStartOnInitialConnection: !s.persistent,
		SessionExpiryInterval:         ttl,
		ReconnectBackoff:              c.reconnectBackoff,
		AttemptConnection:             c.dial,
		ConnectTimeout:                10 * time.Second,
		ConnectUsername:               strconv.FormatInt(s.UserID, 10),
		ConnectPacketBuilder:          c.buildConnect,
		OnConnectionUp:                c.onUp,
		OnConnectionDown:              c.onDown,
		OnConnectError:                c.onConnectError,
		ClientConfig: paho.ClientConfig{
			ClientID: s.ClientID,
			// paho bounds every wait for an acknowledgement by this
			// (default 10s) whatever the context allows: the send's own
			// AckTimeout must be the bound, and a SUBACK may take as long.
			PacketTimeout:     s.AckTimeout,
			Session:           c.session,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){c.onPublish},
			OnClientError:     func(err error) { s.Logger.Debug("mqtt connection error", "err", err) },
		},
	}
	c.workers.Add(2)
	go func() { defer c.workers.Done(); c.disp.run() }()
	go func() { defer c.workers.Done(); c.reads.run() }()
	var connLife context.Context
	connLife, c.connStop = context.WithCancel(c.life)
	cm, err := autopaho.NewConnection(connLife, acfg)
	if err != nil {
		c.stop()
		c.workers.Wait()
		return nil, fmt.Errorf("start connection: %w", err)
	}
	if testHookNewConnection != nil {
		testHookNewConnection()
	}
	// The connection may be up (and the dispatcher issuing RPCs) already:
	// onUp has stored the same manager then.
	c.cm.Store(cm)
	for _, p := range c.journal.list() {
		c.startSend(p, false)
	}
	ok = true
	return c, nil
}

// testHookNewConnection, set by tests, runs in New between starting the
// connection manager and recording it.
var testHookNewConnection func()

// manager returns the connection manager (nil only while New runs and no
// connection has come up yet).
func (c *Client) manager() *autopaho.ConnectionManager { return c.cm.Load() }

// openSession locks the session dir and opens the send journal and paho's
// file store in it (or memory stores without a dir).
func (c *Client) openSession() error {
	dir := c.cfg.SessionDir
	if dir == "" {
		c.session = state.NewInMemory()
		j, _ := openJournal("")
		c.journal = j
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create session dir: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open session lock: %w", err)
	}
	if err := lockFile(lf); err != nil {
		lf.Close()
		return fmt.Errorf("session dir %s is in use by another client (close it first): %w", dir, err)
	}
	c.lock = lf
	cs, err := file.New(filepath.Join(dir, "paho"), "client-", ".pkt")
	if err != nil {
		return fmt.Errorf("open paho client store: %w", err)
	}
	ss, err := file.New(filepath.Join(dir, "paho"), "server-", ".pkt")
	if err != nil {
		return fmt.Errorf("open paho server store: %w", err)
	}
	c.session = state.New(cs, ss)
	if c.journal, err = openJournal(dir); err != nil {
		return err
	}
	return nil
}

// backoff is the delay after failed attempt n: none for the first
// attempt, then exponential from 250ms with full jitter, capped.
func (c *Client) backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := 250 * time.Millisecond << min(n-1, 10)
	d = min(d, c.cfg.MaxReconnectDelay)
	return d/2 + rand.N(d/2+1)
}

func (c *Client) buildConnect(cp *paho.Connect, _ *url.URL) (*paho.Connect, error) {
	tok := c.cfg.Token
	if c.cfg.TokenFunc != nil {
		ctx, cancel := context.WithTimeout(c.life, 10*time.Second)
		defer cancel()
		var err error
		if tok, err = c.cfg.TokenFunc(ctx); err != nil {
			return nil, fmt.Errorf("get token: %w", err)
		}
	}
	cp.Password, cp.PasswordFlag = []byte(tok), true
	// autopaho fills ConnectProperties for a session expiry and leaves
	// RequestProblemInfo false, which paho encodes as Request Problem
	// Information = 0. MQTT 5 then forbids user properties and reason
	// strings on PUBACKs, i.e. chatd's seq and refusal reasons
	// (docs/protocol.md "Send outcomes"). Ask for them explicitly.
	if cp.Properties == nil {
		cp.Properties = &paho.ConnectProperties{}
	}
	cp.Properties.RequestProblemInfo = true
	return cp, nil
}

// onUp runs when autopaho has a connection; it must not block.
func (c *Client) onUp(cm *autopaho.ConnectionManager, ca *paho.Connack) {
	c.cm.CompareAndSwap(nil, cm)
	ctx, cancel := context.WithCancel(c.life)
	cs := &connState{ctx: ctx, cancel: cancel, ready: make(chan struct{}), cm: cm}
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		cs.maxPacket = *ca.Properties.MaximumPacketSize
	}
	c.stats.connects.Add(1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return
	}
	c.conn = cs
	c.lastErr = nil
	c.notifyLocked()
	c.workers.Add(1) // under mu: Close waits only after marking closed
	c.mu.Unlock()
	c.cfg.Logger.Info("connected to chatd", "client", c.cfg.ClientID, "sessionPresent", ca.SessionPresent)
	h := c.disp.holdForCatchUp()
	go func() {
		defer c.workers.Done()
		ok := c.subscribe(cm, cs)
		c.disp.release(h, time.Now(), ok)
		if ok {
			c.reads.kick()
		}
	}()
}

// subscribe (re)subscribes on every connection (chatd answers "no session"
// after a restart, and subscribing again is harmless otherwise), then marks
// the connection ready; it reports whether it did. The dispatcher then
// catches up, before the events that arrived since the connection came up.
func (c *Client) subscribe(cm *autopaho.ConnectionManager, cs *connState) bool {
	ctx, cancel := context.WithTimeout(cs.ctx, c.cfg.RequestTimeout)
	defer cancel()
	sa, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		{Topic: c.eventsTopic, QoS: 1},
		{Topic: c.rpcTopic, QoS: 1},
	}})
	if err == nil {
		for _, rc := range sa.Reasons {
			if rc >= 0x80 {
				err = fmt.Errorf("subscribe refused with reason 0x%02x", rc)
			}
		}
	}
	if err != nil {
		if cs.ctx.Err() == nil {
			c.cfg.Logger.Warn("subscribe failed; reconnecting", "err", err)
			c.recordErr(fmt.Errorf("subscribe: %w", err))
			cm.TerminateConnectionForTest() // drop it: the next connection subscribes again
		}
		return false
	}
	if h := c.subscribedHook.Load(); h != nil {
		(*h)()
	}
	close(cs.ready)
	c.mu.Lock()
	c.notifyLocked()
	c.mu.Unlock()
	return true
}

// Another client connecting with the same client id takes the session
// over (DISCONNECT 0x8E), and the one taken over, reconnecting at once,
// takes it back: two clients sharing a ClientID would do so for ever.
// takeoverLimit takeovers within takeoverWindow stop the client, as the
// one taken over most and first: the other goes on. A single takeover (an
// earlier run of the application still connected) is survived.
const (
	takeoverLimit  = 3
	takeoverWindow = time.Minute
)

// serverDisconnected is told the reason code of chatd's DISCONNECT, on
// the connection's reader, before autopaho reports the connection down.
func (c *Client) serverDisconnected(reason byte) {
	if reason == 0x8E {
		c.takenOver.Store(true)
	}
}

// onDown runs when the connection is lost; it reports whether autopaho
// should reconnect (not after Close, nor after too many takeovers).
func (c *Client) onDown() bool {
	takenOver := c.takenOver.Swap(false)
	c.mu.Lock()
	if c.conn != nil {
		c.conn.cancel()
		c.conn = nil
	}
	closed := c.closed
	var stop *Error
	if takenOver && !closed && c.stopped == nil {
		now := time.Now()
		c.takeovers = append(slices.DeleteFunc(c.takeovers, func(t time.Time) bool {
			return now.Sub(t) >= takeoverWindow
		}), now)
		if len(c.takeovers) >= takeoverLimit {
			stop = &Error{Op: "connect", Code: "taken_over", Reason: 0x8E,
				Message: fmt.Sprintf("another client connected with client id %q %d times within %v; not reconnecting (give each client its own ClientID or SessionDir)",
					c.cfg.ClientID, len(c.takeovers), takeoverWindow)}
			c.stopped, c.lastErr = stop, stop
		}
	}
	c.notifyLocked()
	c.mu.Unlock()
	switch {
	case closed:
		return false
	case stop != nil:
		c.cfg.Logger.Error("another client uses this client id; not reconnecting", "client", c.cfg.ClientID, "err", stop)
		c.connStop()
		c.disp.push(queued{event: &Event{Type: EventError, Code: stop.Code, Message: stop.Message}, stop: true})
		return false
	case takenOver:
		c.cfg.Logger.Warn("another connection with this client id took the session over; reconnecting", "client", c.cfg.ClientID)
	default:
		c.cfg.Logger.Info("connection to chatd lost; reconnecting", "client", c.cfg.ClientID)
	}
	return true
}

// onConnectError records a failed attempt. A refused static Token ends
// the reconnecting: the same token will be refused every time (it is bad,
// expired or revoked), and retrying forever would only load chatd. With
// TokenFunc the next attempt may bring a new token; the refusal is
// recorded as the last failure, matching ErrUnauthorized, so that
// AwaitConnection tells a refused token from an unreachable chatd. A
// refused client id ends it whatever the token: every attempt presents
// the same one.
func (c *Client) onConnectError(err error) {
	if idErr := asClientIDError(err); idErr != nil {
		c.stopConnecting(err, idErr, "chatd refused the client id; not reconnecting (give this client a ClientID or SessionDir of its own)")
		return
	}
	authErr := asAuthError(err)
	if authErr == nil || c.cfg.TokenFunc != nil {
		c.cfg.Logger.Debug("connect to chatd failed", "err", err)
		if authErr != nil {
			err = fmt.Errorf("%w (%w)", authErr, err)
		}
		c.recordErr(err)
		return
	}
	c.stopConnecting(err, authErr, "chatd refused the token; not reconnecting (a new client with a valid token sends what is pending)")
}

// stopConnecting stops the reconnecting for good after err, a refusal
// stop says the meaning of, told once in the log (msg) and as an error
// event of stop's code.
func (c *Client) stopConnecting(err error, stop *Error, msg string) {
	c.mu.Lock()
	first := c.stopped == nil
	c.lastErr, c.stopped = err, stop
	c.notifyLocked()
	c.mu.Unlock()
	c.connStop()
	if first {
		c.cfg.Logger.Error(msg, "err", err)
		c.disp.push(queued{event: &Event{Type: EventError, Code: stop.Code, Message: stop.Error()}, stop: true})
	}
}

// Err is nil while the client is running. Once chatd refused a static
// Token (bad, expired or revoked) it is an *Error matching
// ErrUnauthorized: the client no longer connects, and its requests and
// sends fail with that error (sends stay in SessionDir). Events carries an
// error event with code "unauthorized" at that moment. Once chatd refused
// the ClientID (another user's, or longer than 256 bytes), with a static
// Token or a TokenFunc, it is an *Error matching ErrClientIDRejected (code
// "client_id_rejected"), with the same consequences. Once other clients
// connecting with the same ClientID took the session over 3 times within
// a minute, it is an *Error matching ErrTakenOver (code "taken_over"), with
// the same consequences and an error event of that code.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

func (c *Client) recordErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.notifyLocked()
	c.mu.Unlock()
}

// notifyLocked wakes everything waiting for a state change.
func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// ready waits until a connection is up and subscribed and returns it.
// A static Token that chatd refused ends the wait at once with
// ErrUnauthorized, a client id it refused with ErrClientIDRejected, a
// client id other clients took with ErrTakenOver: no connection will come.
func (c *Client) ready(ctx context.Context) (*connState, error) {
	for {
		c.mu.Lock()
		cs, ch, stopped, closed := c.conn, c.changed, c.stopped, c.closed
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if cs != nil {
			select {
			case <-cs.ready:
				return cs, nil
			default:
			}
		}
		if stopped != nil {
			return nil, stopped
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.life.Done():
			return nil, ErrClosed
		}
	}
}

// AwaitConnection waits until the client is connected and subscribed. If
// ctx ends first, the error says why the last attempt failed (it wraps the
// network error, e.g. syscall.ECONNREFUSED). A refused token with a static
// Token fails at once with ErrUnauthorized; with TokenFunc, whose next
// token may be accepted, the client keeps trying, and the error when ctx
// ends matches ErrUnauthorized too if the last attempt's token was
// refused.
func (c *Client) AwaitConnection(ctx context.Context) error {
	_, err := c.ready(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	c.mu.Lock()
	last := c.lastErr
	c.mu.Unlock()
	if last != nil {
		return fmt.Errorf("connect to chatd: %w (last attempt: %w)", err, last)
	}
	return fmt.Errorf("connect to chatd: %w", err)
}

// asAuthError turns a CONNACK "bad user name or password" / "not
// authorized" into an *Error matching ErrUnauthorized.
func asAuthError(err error) *Error {
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) && (ce.ReasonCode == 0x86 || ce.ReasonCode == 0x87 || ce.ReasonCode == 0x04 || ce.ReasonCode == 0x05) {
		return &Error{Op: "connect", Code: "unauthorized", Message: "chatd refused the token (bad, expired or revoked)", Reason: ce.ReasonCode}
	}
	return nil
}

// asClientIDError turns a CONNACK "client identifier not valid" (3.1.1:
// identifier rejected) into an *Error matching ErrClientIDRejected.
func asClientIDError(err error) *Error {
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) && (ce.ReasonCode == 0x85 || ce.ReasonCode == 0x02) {
		return &Error{Op: "connect", Code: "client_id_rejected", Reason: ce.ReasonCode,
			Message: "chatd refused the client id (another user's, or longer than 256 bytes): give this client a ClientID or SessionDir of its own"}
	}
	return nil
}

// Connected reports whether a connection is up and subscribed.
func (c *Client) Connected() bool {
	c.mu.Lock()
	cs := c.conn
	c.mu.Unlock()
	if cs == nil {
		return false
	}
	select {
	case <-cs.ready:
		return true
	default:
		return false
	}
}

// UserID is the user this client acts as.
func (c *Client) UserID() int64 { return c.cfg.UserID }

// ClientID is the MQTT client id in use.
func (c *Client) ClientID() string { return c.cfg.ClientID }

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{
		Connects:       c.stats.connects.Load(),
		Delivered:      c.stats.delivered.Load(),
		Duplicates:     c.stats.duplicates.Load(),
		Filled:         c.stats.filled.Load(),
		GapFills:       c.stats.gapFills.Load(),
		Resends:        c.stats.resends.Load(),
		ReadsPublished: c.stats.reads.Load(),
	}
}

// Pending lists the sends not acknowledged yet, in the order they were
// queued.
func (c *Client) Pending() []PendingSend { return c.journal.list() }

// Close flushes pending read receipts if connected (bounded by ctx; they
// are dropped otherwise), disconnects and
// stops the client. Unacknowledged sends stay in SessionDir and are sent by
// the next client opened on it. The Events channel is closed once the
// dispatcher has stopped. Close is idempotent.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		var errs []error
		if c.Connected() {
			if err := c.Flush(ctx); err != nil && !errors.Is(err, ErrClosed) {
				errs = append(errs, fmt.Errorf("flush read receipts: %w", err))
			}
		}
		c.mu.Lock()
		c.closed = true
		c.notifyLocked()
		c.mu.Unlock()
		c.stop()
		if cm := c.manager(); cm != nil {
			if err := cm.Disconnect(ctx); err != nil {
				errs = append(errs, fmt.Errorf("disconnect: %w", err))
			}
		}
		c.workers.Wait()
		_ = c.session.Close()
		if err := c.journal.close(); err != nil {
			errs = append(errs, fmt.Errorf("close send journal: %w", err))
		}
		if c.lock != nil {
			c.lock.Close()
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// untilClose is ctx ended by Close too, for the operations of several
// HTTP requests and RPCs (Upload, Download): their HTTP requests do not
// wait for a connection, so nothing else would stop them sending a file
// again, or fetching one with the closed client's token, after Close.
// It fails with ErrClosed once the client is closed.
func (c *Client) untilClose(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if c.life.Err() != nil {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// TerminateConnection drops the network connection without DISCONNECT, as a
// lost network would; the client reconnects by itself. For tests and demos.
func (c *Client) TerminateConnection() {
	if cm := c.manager(); cm != nil {
		cm.TerminateConnectionForTest()
	}
}

// onPublish routes an incoming PUBLISH: RPC replies to their caller,
// events to the dispatcher. It never blocks (paho calls it on the
// connection's only reader).
func (c *Client) onPublish(pr paho.PublishReceived) (bool, error) {
	p := pr.Packet
	switch p.Topic {
	case c.rpcTopic:
		if drop := c.dropReply.Load(); drop != nil && (*drop)(p.Payload) {
			return true, nil
		}
		if p.Properties != nil {
			c.rpc.deliver(p.Properties.CorrelationData, p.Payload)
		}
	case c.eventsTopic:
		if drop := c.dropEvent.Load(); drop != nil && (*drop)(p.Payload) {
			return true, nil
		}
		c.disp.enqueue(append([]byte(nil), p.Payload...))
	default:
		c.cfg.Logger.Debug("publish on an unexpected topic", "topic", p.Topic)
	}
	return true, nil
}
