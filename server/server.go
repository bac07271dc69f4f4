package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/broker"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/attach"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/delivery"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/presence"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/ratelimit"
	"github.com/chatd/chatd/internal/relay"
	"github.com/chatd/chatd/internal/shutdown"
	"github.com/chatd/chatd/internal/tracing"
	"github.com/chatd/chatd/store"
)

// Server is one running chatd node.
type Server struct {
	Settings config.Settings
	Pool     *pgxpool.Pool
	Service  *chat.Service
	Hub      *delivery.Hub
	Broker   *broker.Broker
	Registry *prometheus.Registry
	Secret   []byte
	// Receipts batches read receipts and delivered watermarks.
	Receipts *store.Receipts
	// Presence tracks who is online.
	Presence *presence.Tracker
	// Limiter enforces the rate limits (local or shared through Redis).
	Limiter *ratelimit.Limiter
	// Attachments is the attachment subsystem; Blobs where its bytes are.
	Attachments *attach.Service
	Blobs       chat.BlobStore
	attachStore *store.Attachments
	// objectOrigin is where browsers reach Blobs (an object store's
	// presigned URLs): the web client's CSP admits it.
	objectOrigin []string

	presencePub *relay.EphemeralPublisher // this node's presence events for the others; nil without Kafka
	typingPub   *relay.EphemeralPublisher // this node's typing events for the others; nil without Kafka
	relay       *relay.Relay              // nil without Kafka
	consumer    *relay.Consumer           // of the other nodes' events; nil without Kafka
	profiles    *remoteProfiles           // the other nodes' profile.updated; nil without Kafka
	push        *push.Pusher
	devices     *push.Devices
	sessions    *store.Sessions

	log      *slog.Logger
	closeDB  func(context.Context) error
	nodeLock *nodeLock       // this node's claim of its id; nil until taken
	dbExited <-chan struct{} // the embedded PostgreSQL's exit; nil with a database URL
	store    *store.Store
	sendPool *pgxpool.Pool
	httpSrv  *http.Server
	httpLn   net.Listener
	bg       context.CancelFunc // stops the workers
	workers  shutdown.Group
	closed   bool
	api      *httpapi.API

	// largeGroup: conversations above it get no profile pushes (people.go).
	largeGroup int

	ops opsState // TLS, identity provider, HTTPS and metrics listeners (ops.go)

	tracer *tracing.Tracer // nil: tracing off

	// noTakeoverWatch: this node is not told when a connection on another
	// node takes one of its sessions over (tests of a late or lost notice).
	noTakeoverWatch bool
	// bodyTimeout is how long a request body may take to arrive
	// (requestBodyTimeout; shorter in tests).
	bodyTimeout time.Duration
	// transferIdle replaces httpapi's transfer idle time when set (tests).
	transferIdle time.Duration
	// slowTimeout replaces delivery's SlowTimeout when set (tests).
	slowTimeout time.Duration
	// deliveryQueue replaces delivery's QueueSize when set
	// (WithDeliveryQueueSize).
	deliveryQueue int
	// thumbnailWait replaces attach's ThumbnailWait when set (tests).
	thumbnailWait time.Duration
	// extraWorkers run with the node's own (tests of a worker that does
	// not stop).
	extraWorkers []worker
}

// Option adds to what the settings configure.
type Option func(*Server)

// WithTracerProvider traces the node's sends, HTTP requests and relayed
// events with tp (docs/operations.md, Tracing, lists the spans); without
// it nothing is traced. The caller owns tp: it shuts tp down, flushing the
// spans still queued, after Close.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Server) { s.tracer = tracing.New(tp) }
}

// WithDeliveryQueueSize has each session hold at most n live events
// waiting to be written (delivery.Options.QueueSize, 1024) before it drops
// them and catches up from PostgreSQL: tests of what a client gets after
// such an overflow make one with a few events.
func WithDeliveryQueueSize(n int) Option { return func(s *Server) { s.deliveryQueue = n } }

// Start brings a node up; on error everything started so far is stopped.
func Start(ctx context.Context, st config.Settings, log *slog.Logger, opts ...Option) (_ *Server, err error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{Settings: st, log: log, Registry: prometheus.NewRegistry()}
	for _, o := range opts {
		o(s)
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = s.Close(cctx)
			cancel()
		}
	}()
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.registerOpsMetrics()

	// The application name stamps this node on the outbox rows it commits,
	// so its Kafka consumer can skip events it already delivered itself.
	appName := originName(st.NodeID)
	if err := s.openDB(ctx, st, appName); err != nil {
		return nil, err
	}
	// Before anything keyed by the node id (presence marks, the consumer
	// group) is touched: a second node with the id must not.
	if s.nodeLock, err = claimNodeID(ctx, s.Pool.Config().ConnConfig, st, log, 0); err != nil {
		return nil, err
	}
	verifier, err := s.setupCredentials(st)
	if err != nil {
		return nil, err
	}

	limits := st.Limits()
	if err := s.startCore(ctx, st, limits, appName); err != nil {
		return nil, err
	}
	if err := s.startAttachments(ctx, st); err != nil {
		return nil, err
	}

	apiOpts := []httpapi.Option{httpapi.WithTracer(s.tracer), httpapi.WithSendTimeout(st.SendTimeout)}
	if s.transferIdle > 0 {
		apiOpts = append(apiOpts, httpapi.WithTransferIdle(s.transferIdle))
	}
	api := httpapi.New(s.Service, verifier.VerifyIssuedAt, func(context.Context) error { return s.ops.ping.get() }, log.With("component", "http"), apiOpts...)
	s.api = api
	if err := s.prepareConsumer(ctx, st, appName); err != nil {
		return nil, err
	}
	hook, err := s.startBroker(st, api, verifier)
	if err != nil {
		return nil, err
	}
	if err := s.startHTTP(st, api, s.Secret); err != nil {
		return nil, err
	}
	if err := s.startBackground(st, hook); err != nil {
		return nil, err
	}

	s.logListeners(st)
	return s, nil
}

// maxAppName is the longest application_name PostgreSQL keeps
// (NAMEDATALEN - 1); it cuts a longer one short without a word.
const maxAppName = 63

// originName is the node's application_name, which stamps the outbox rows
// it commits and its ephemeral events (the origin its consumer skips):
// "chatd:<node id>", or, for an id too long for that, "chatd:", the id's
// first 40 bytes, "~" and 16 hex digits of its SHA-256. Cut short by
// PostgreSQL, the outbox's origin would not be the one the node skips, and
// two long ids that begin alike would share one.
func originName(nodeID string) string {
	name := "chatd:" + nodeID
	if len(name) <= maxAppName {
		return name
	}
	sum := sha256.Sum256([]byte(nodeID))
	return name[:maxAppName-17] + "~" + hex.EncodeToString(sum[:8])
}

// openDB opens (or, without a URL, starts) PostgreSQL as appName, brings
// its schema up to this binary's migrations and exports the pool's
// metrics.
func (s *Server) openDB(ctx context.Context, st config.Settings, appName string) error {
	opts := []pgembed.PoolOption{pgembed.WithApplicationName(appName)}
	if src := st.Source("db_max_conns"); src != config.SourceDefault {
		opts = append(opts, pgembed.WithMaxConnsFrom("db_max_conns from "+src))
	}
	pool, closeDB, err := pgembed.OpenOwner(ctx, st.DatabaseURL, st.DataDir, st.DBMaxConns, s.log, opts...)
	var bad *pgembed.URLError
	if errors.As(err, &bad) {
		// A bad setting like those config.Load refuses, found later:
		// chatd exits 2 for it, and no restart is tried.
		return &config.Error{Key: "database_url", Source: st.Source("database_url"), Reason: bad.Error(),
			Fix: "fix the URL (CHAT_DATABASE_URL, -database-url or database_url in the YAML file)", Err: err}
	}
	if err != nil {
		return err
	}
	s.Pool, s.closeDB = pool, closeDB
	s.dbExited = pgembed.Exited(pool)
	// A node with Kafka turns outbox rows on as it migrates, before its
	// relay and consumer start and before it accepts clients: every event
	// committed after this reaches its relay (functions.sql,
	// chat_want_outbox). Without Kafka only a pruner turns them off.
	var migrateOpts []store.MigrateOption
	if len(st.KafkaBrokers) > 0 {
		migrateOpts = append(migrateOpts, store.WantOutbox())
	}
	applied, err := store.Migrate(ctx, pool, migrateOpts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) > 0 {
		s.log.Info("migrations applied", "versions", applied)
	}
	s.Registry.MustRegister(newPoolCollector(pool))
	return nil
}

// setupCredentials loads what the node proves itself and its users with:
// the JWT secret (from the settings, else created once in the data dir),
// the TLS certificates, the optional JWT public key, and from them the
// token verifier.
func (s *Server) setupCredentials(st config.Settings) (*auth.Verifier, error) {
	secret := []byte(st.JWTSecret)
	if len(secret) == 0 {
		var err error
		if secret, err = auth.LoadOrCreateSecret(st.DataDir); err != nil {
			return nil, fmt.Errorf("jwt secret: %w", err)
		}
	}
	s.Secret = secret
	if err := s.setupTLS(st); err != nil {
		return nil, err
	}
	var pub any
	if st.JWTPublicKey != "" {
		var err error
		if pub, err = auth.LoadPublicKey(st.JWTPublicKey); err != nil {
			return nil, fileSettingError(st, "jwt_public_key", err,
				"give the path of the identity provider's PEM public key (RSA, ECDSA P-256 or Ed25519), a file chatd can read, or unset jwt_public_key")
		}
	}
	return s.newVerifier(st, secret, pub)
}

// startBroker wires the MQTT hooks to the domain (RPC through api) and
// starts the broker's listeners; it returns the hook, whose connection
// count a background runner refreshes.
func (s *Server) startBroker(st config.Settings, api *httpapi.API, verifier *auth.Verifier) (*hooks.Chat, error) {
	var sharedConns hooks.SharedConns // with Redis, the connection cap holds across nodes
	if s.Limiter.SharesConns() {
		sharedConns = s.Limiter
	}
	hook := hooks.New(hooks.Config{
		Service:     s.Service,
		Sessions:    s.sessions,
		Hub:         s.Hub,
		Verify:      verifier.VerifyIssued,
		PeerUser:    s.peerUser(),
		RPC:         api.RPC,
		Presence:    s.Presence,
		SendTimeout: st.SendTimeout,
		Logger:      s.log.With("component", "hooks"),
		Metrics:     hooks.NewMetrics(s.Registry),

		ConnectBudget:         hooks.ConnectBudget{Rate: st.ConnectBudgetRate, Queue: st.ConnectBudgetQueue},
		MaxConnectionsPerUser: st.MaxConnectionsPerUser,
		SharedConns:           sharedConns,
		NodeID:                st.NodeID,
		Tracer:                s.tracer,
	})
	bc := broker.Config{
		MQTTAddr:       st.MQTTAddr,
		AllowedOrigins: st.WSAllowedOrigins,
		Hook:           hook,
		Hub:            s.Hub,
		Limits:         s.Service.Limits,
		Logger:         s.log,

		MaxPendingPerIP: st.MaxPendingConnectsPerIP,
	}
	s.brokerTLS(st, &bc)
	var err error
	s.Broker, err = broker.New(bc)
	if err != nil {
		return nil, err
	}
	if err := s.Broker.Server.AddHook(newConnMetrics(s.Registry), nil); err != nil {
		return nil, fmt.Errorf("add connection metrics hook: %w", err)
	}
	if err := s.Broker.Start(); err != nil {
		return nil, err
	}
	return hook, nil
}

// prepareConsumer, with Kafka, ensures the topic and makes the consumer of
// the other nodes' events, pinning where a new consumer group starts
// (relay.Consumer.Pin) before the broker accepts clients: every event
// relayed after a client's session is loaded then reaches it. Kafka
// unreachable now is logged, not fatal: the relay and the consumer retry.
func (s *Server) prepareConsumer(ctx context.Context, st config.Settings, appName string) error {
	if s.relay == nil {
		return nil
	}
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	if err := relay.EnsureTopic(tctx, st.KafkaBrokers, st.KafkaTopic, eventsPartitions); err != nil {
		s.log.Warn("could not ensure the Kafka topic; the relay retries publishing", "topic", st.KafkaTopic, "err", err)
	}
	cons, err := relay.NewConsumer(relay.ConsumerConfig{Brokers: st.KafkaBrokers, Topic: st.KafkaTopic, NodeID: st.NodeID,
		Handler: s.consume, SkipOrigin: appName, Resync: s.Hub.Resync, Logger: s.log, Registerer: s.Registry,
		Tracer: s.tracer})
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	if err := cons.Pin(tctx); err != nil {
		s.log.Warn("could not pin where the Kafka consumer starts; the consumer pins it before it joins the group, retrying until Kafka answers, and the sessions then re-read from PostgreSQL what was relayed meanwhile", "err", err)
	}
	s.consumer = cons
	s.profiles = newRemoteProfiles(s.store, s.Hub, s.largeGroup, s.log.With("component", "remote-profiles"))
	return nil
}

// eventsPartitions is the partition count chatd creates chat.events with
// (docs/operations.md, Sizing Kafka partitions): as a node starts, or,
// when Kafka was unreachable then, by the relay before its first write.
const eventsPartitions = 12

// worker is one of the node's long-running loops, named for the report of
// a shutdown that could not stop it.
type worker struct {
	name string
	run  func(context.Context) error
}

// startBackground starts the node's long-running loops under one context
// that Close cancels: with Kafka the outbox relay and the consumer of
// other nodes' events, without it the outbox pruner; and always the
// connection-count refresh, the search maintenance, the push loop, the
// watch for sessions taken over on other nodes and the session expiry.
func (s *Server) startBackground(st config.Settings, hook *hooks.Chat) error {
	var workers []worker
	if rl := s.relay; rl != nil {
		workers = append(workers, worker{"outbox relay", rl.Run}, worker{"kafka consumer", s.consumer.Run},
			worker{"remote profiles", s.profiles.run})
	} else {
		pr, err := relay.NewPruner(s.Pool, relay.PrunerConfig{Logger: s.log, Registerer: s.Registry})
		if err != nil {
			return fmt.Errorf("outbox pruner: %w", err)
		}
		workers = append(workers, worker{"outbox pruner", pr.Run})
	}
	notices := store.Notices{TakenOver: hook.SessionTakenOver, TokensRevoked: hook.TokensRevoked}
	if s.noTakeoverWatch {
		notices.TakenOver = nil
	}
	workers = append(workers,
		worker{"connection count refresh", func(ctx context.Context) error { return refreshConnections(ctx, hook, s.log) }},
		worker{"search maintenance", func(ctx context.Context) error {
			return s.store.RunSearchMaintenance(ctx, searchMaintenanceInterval, s.log.With("component", "search-maintenance"))
		}},
		worker{"push", s.push.Run},
		worker{"notices watch", func(ctx context.Context) error {
			return s.sessions.Watch(ctx, notices, s.log.With("component", "notices"))
		}},
		worker{"session expiry", s.expireSessions},
	)
	if s.ops.clientCAs != nil {
		workers = append(workers, worker{"client certificates watch", func(ctx context.Context) error { return s.watchClientCerts(ctx, hook) }})
	}
	workers = append(workers, s.extraWorkers...)
	bgCtx, cancel := context.WithCancel(context.Background())
	s.bg = cancel
	for _, w := range workers {
		s.workers.Go(w.name, func() {
			if err := w.run(bgCtx); err != nil {
				s.log.Error("background worker stopped", "worker", w.name, "err", err)
			}
		})
	}
	return nil
}

// startCore builds the node's core in the one direction its parts depend
// on each other: the relay (it only needs the pool), the delivery hub (it
// reads from PostgreSQL and hands stored events on to the relay), the
// presence tracker (the store hands it the removals it commits), the store
// (it publishes every committed write to the hub), the receipts and the
// Service. Nothing is bound after the fact: the
// delivered acknowledgements the hub records wait in a buffer that exists
// before both the hub and the receipts that flush it.
func (s *Server) startCore(ctx context.Context, st config.Settings, limits chat.Limits, appName string) error {
	log, pool := s.log, s.Pool
	var err error
	s.sessions = store.NewSessions(pool)
	if len(st.KafkaBrokers) > 0 {
		if s.relay, err = relay.New(pool, relay.Config{Brokers: st.KafkaBrokers, Topic: st.KafkaTopic, NodeID: st.NodeID,
			Partitions: eventsPartitions, Entries: s.sessions, Logger: log, Registerer: s.Registry, Tracer: s.tracer}); err != nil {
			return fmt.Errorf("kafka relay: %w", err)
		}
	}
	delivered := store.NewDeliveredBuffer()
	hubOpts := delivery.Options{
		Window:      st.MaxInflight,
		LargeGroup:  st.LargeGroup,
		CursorFlush: st.CursorFlush,
		SlowTimeout: s.slowTimeout,
		QueueSize:   s.deliveryQueue,
		Logger:      log.With("component", "delivery"),
		Metrics:     delivery.NewMetrics(s.Registry),
		Delivered:   delivered,
		Tracer:      s.tracer,
	}
	if s.relay != nil {
		hubOpts.Next = s.relay
	}
	s.Hub = delivery.NewHub(s.sessions, hubOpts)
	publisher, err := s.startPush(ctx, st)
	if err != nil {
		return err
	}
	if s.relay != nil {
		// Typing is not stored, so the outbox does not carry it: the
		// store's typing events go to the other nodes directly.
		if s.typingPub, err = relay.NewEphemeralPublisher(relay.EphemeralConfig{Brokers: st.KafkaBrokers, Topic: st.KafkaTopic,
			Origin: appName, Kind: relay.EphemeralTyping, Logger: log.With("component", "typing"), Registerer: s.Registry}); err != nil {
			return fmt.Errorf("typing: %w", err)
		}
		publisher = teePublisher{publisher, typingOut{s.typingPub}}
	}

	var publish func(chat.Event)
	if s.relay != nil {
		if s.presencePub, err = relay.NewEphemeralPublisher(relay.EphemeralConfig{Brokers: st.KafkaBrokers, Topic: st.KafkaTopic,
			Origin: appName, Kind: relay.EphemeralPresence, Logger: log.With("component", "presence"), Registerer: s.Registry}); err != nil {
			return fmt.Errorf("presence: %w", err)
		}
		publish = s.presencePub.Publish
	}
	if s.Presence, err = presence.New(presence.Config{NodeID: st.NodeID, Store: store.NewPresence(pool, presence.TTL(presenceHeartbeat)),
		Hub: s.Hub, LargeGroup: st.LargeGroup, Heartbeat: presenceHeartbeat, Grace: st.PresenceGrace, Publish: publish, NoPush: !st.PresencePush,
		Logger: log.With("component", "presence"), Registerer: s.Registry}); err != nil {
		return err
	}
	if err := s.Presence.Start(ctx); err != nil {
		s.Presence = nil
		return err
	}
	// The joins and removals the store commits start or end some users'
	// sharing of presence (those of other nodes come through consume).
	publisher = teePublisher{publisher, sharingChanged{s.Presence}}

	// Group commit gets connections of its own (one per transaction in
	// flight, and one more) so sends never wait behind history reads and
	// delivery catch-up for the pool.
	const maxSendTxs = 4
	sendCfg := pool.Config()
	sendCfg.MaxConns, sendCfg.MinConns = maxSendTxs+1, 0
	// A batch is one call of chat_send_batch, which caches its own
	// statements' plans; the call itself needs no planning each time.
	sendCfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "auto"
	if s.sendPool, err = pgxpool.NewWithConfig(ctx, sendCfg); err != nil {
		return fmt.Errorf("open send pool: %w", err)
	}
	s.store = store.New(pool, limits, store.WithBatching(256, maxSendTxs), store.WithSendPool(s.sendPool),
		store.WithPublisher(publisher), store.WithRelayWake(relayWakeNeeded(s.relay)), store.WithTracer(s.tracer),
		store.WithUploadTypes(st.UploadTypes), store.WithSendTimeout(max(10*time.Second, st.SendTimeout)), store.WithLargeGroup(st.LargeGroup))
	s.Registry.MustRegister(newSendBatchCollector(s.store.BatchStats))
	if s.Receipts, err = store.NewReceipts(s.store, store.ReceiptsConfig{Delivered: delivered, DeliveredInterval: st.DeliveredFlush,
		Logger: log.With("component", "receipts"), Registerer: s.Registry}); err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	if s.Limiter, err = ratelimit.New(ratelimit.Config{RedisURL: st.RedisURL,
		Logger: log.With("component", "ratelimit"), Registerer: s.Registry}); err != nil {
		return fmt.Errorf("rate limiter: %w", err)
	}
	s.Service = chat.NewService(s.store, limits)
	s.Service.Limiter = s.Limiter
	s.Service.Rates = st.RateLimits()
	s.Service.Receipts = s.Receipts
	s.Service.PresenceSource = s.Presence
	s.Service.LargeGroup = st.LargeGroup
	s.largeGroup = st.LargeGroup
	s.Service.Push = s.devices
	return nil
}

// searchMaintenanceInterval is how often a node merges the search indexes'
// pending lists (store.RunSearchMaintenance): sends then append to them
// and never pay for a merge.
const searchMaintenanceInterval = time.Second

// relayWakeNeeded says whether a hot write must NOTIFY the outbox relay
// after its commit: only a relay on another node needs it. Without Kafka
// no relay listens anywhere; a leading local relay is woken in-process
// (the hub hands it every stored event).
func relayWakeNeeded(rl *relay.Relay) func() bool {
	return func() bool { return rl != nil && !rl.Leading() }
}

// refreshConnections keeps this node's connections counted for the
// per-user cap until ctx ends (see hooks.RefreshConnections).
func refreshConnections(ctx context.Context, hook *hooks.Chat, log *slog.Logger) error {
	return everyTick(ctx, ratelimit.ConnRefreshInterval, func() {
		if err := hook.RefreshConnections(ctx); err != nil {
			log.Warn("refresh the shared connection counts failed", "err", err)
		}
	})
}

// everyTick runs fn once an interval until ctx ends; a run that takes
// longer than the interval skips the ticks it overlapped.
func everyTick(ctx context.Context, interval time.Duration, fn func()) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fn()
		}
	}
}

// presenceHeartbeat is how often a node proves itself alive for presence;
// its connections stop counting 3 intervals after it died.
const presenceHeartbeat = 5 * time.Second

// consume routes an event another node committed (or, for presence and
// typing, published) to this node's clients.
func (s *Server) consume(ev chat.Event) {
	switch ev.Type {
	case chat.EventPresence:
		s.Presence.Remote(ev)
		return
	case chat.EventTyping:
		// To the conversation's members connected here, as a typing
		// event of this node's goes (the hub decides who they are): the
		// origin checked the typist (a member, not blocked).
		s.Hub.Deliver(ev)
		return
	case chat.EventProfileUpdated:
		s.profiles.add(ev) // its audience is read off the consumer's goroutine
		return
	}
	s.push.Publish(ev)
	s.Hub.Deliver(ev)
	sharingChanged{s.Presence}.Publish(ev)
}

// sharingChanged hands the member.added, conversation.created and
// member.removed events to the presence tracker: who started or stopped
// sharing presence learns it (presence.Tracker.SharingStarted,
// SharingEnded).
type sharingChanged struct{ t *presence.Tracker }

func (p sharingChanged) Publish(evs ...chat.Event) {
	for _, ev := range evs {
		switch ev.Type {
		case chat.EventMemberAdded, chat.EventConversationCreated:
			p.t.SharingStarted(ev)
		case chat.EventMemberRemoved:
			p.t.SharingEnded(ev)
		}
	}
}

// expireSessions forgets, once a minute until ctx ends, the expired
// sessions of clients not connected to this node.
func (s *Server) expireSessions(ctx context.Context) error {
	return everyTick(ctx, time.Minute, func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := s.sessions.Expire(cctx, s.Hub.ClientIDs())
		cancel()
		if err != nil {
			s.log.Warn("expire sessions failed", "err", err)
		} else if n > 0 {
			s.log.Info("expired sessions", "count", n)
		}
	})
}

// BatchStats reports the group-commit transactions run for sends and the
// sends they carried.
func (s *Server) BatchStats() store.BatchStats { return s.store.BatchStats() }

// DatabaseExited is closed when the embedded PostgreSQL the node started
// exits while the node runs (it is nil with a database URL): nothing starts
// it again, so the node can only stop; its next start runs PostgreSQL's
// crash recovery.
func (s *Server) DatabaseExited() <-chan struct{} { return s.dbExited }

// MQTTAddr is the bound MQTT TCP address.
func (s *Server) MQTTAddr() string {
	if s.Broker == nil {
		return ""
	}
	return s.Broker.MQTTAddr()
}

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// CleanupGrace is how long Close still gives the node's own cleanup once
// Close's context is spent.
const CleanupGrace = 5 * time.Second

// graced is Close's context for the node's own cleanup: the one Close was
// given until it is spent, then one of CleanupGrace, once.
type graced struct {
	c        context.Context
	cancel   context.CancelFunc
	extended bool
}

func (g *graced) ctx() context.Context {
	if !g.extended && g.c.Err() != nil {
		g.extended = true
		g.c, g.cancel = context.WithTimeout(context.WithoutCancel(g.c), CleanupGrace)
	}
	return g.c
}

func (g *graced) stop() {
	if g.cancel != nil {
		g.cancel()
	}
}

// Close shuts the node down in dependency order: it drains the clients
// within ctx, then flushes and stops the node's parts, within ctx or, once
// ctx is spent, within CleanupGrace more. A part that does not stop in
// time (a background worker, a connection it holds) is named in the
// error and left running, so Close returns within ctx and CleanupGrace
// (and an embedded PostgreSQL's immediate shutdown, see pgembed).
func (s *Server) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.api != nil {
		// First, so that a probe of /readyz on the metrics listener (which
		// stays up until the clients are gone) takes the node out of
		// rotation now.
		s.api.Drain()
	}
	var errs []error
	if s.httpSrv != nil {
		// Stop taking HTTP requests but keep WebSocket MQTT connections
		// until the broker has drained them.
		s.httpSrv.SetKeepAlivesEnabled(false)
		_ = s.httpLn.Close()
	}
	s.stopAcceptingOps()
	if s.Broker != nil {
		if err := s.Broker.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	} else if s.Hub != nil {
		if err := s.Hub.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := shutdownHTTP(ctx, "http", s.httpSrv); err != nil {
		errs = append(errs, err)
	}
	if err := s.shutdownOps(ctx); err != nil {
		errs = append(errs, err)
	}
	// ctx bounds the clients' drain. A client that spent it (a request
	// body that never arrives) must not cost the node's own cleanup:
	// flushing the receipts, clearing its presence, stopping PostgreSQL.
	// Neither may a background worker that spent it by not stopping.
	cleanup := &graced{c: ctx}
	defer cleanup.stop()
	// closePart stops one part within what is left of the cleanup budget.
	closePart := func(stop func(context.Context) error) {
		if err := stop(cleanup.ctx()); err != nil {
			errs = append(errs, err)
		}
	}
	// Every client is gone: commit the pending receipts, then clear this
	// node's presence.
	if s.Receipts != nil {
		closePart(s.Receipts.Close)
	}
	if s.Presence != nil {
		closePart(s.Presence.Close)
	}
	for _, p := range []*relay.EphemeralPublisher{s.presencePub, s.typingPub} {
		if p == nil {
			continue
		}
		closePart(p.Close)
	}
	if s.Limiter != nil {
		closePart(s.Limiter.Close)
	}
	if s.bg != nil {
		s.bg()
		// A worker that does not stop (a write to Kafka that hangs) must
		// not hold the shutdown past its budget: it is named and left.
		if err := s.workers.Wait(cleanup.ctx()); err != nil {
			errs = append(errs, fmt.Errorf("stop background workers: %w", err))
		}
	}
	if s.Attachments != nil {
		closePart(s.Attachments.Close)
	}
	if s.store != nil {
		// After the broker drained: no send can arrive any more.
		closePart(s.store.Close)
	}
	if s.sendPool != nil {
		if err := pgembed.ClosePool(cleanup.ctx(), s.sendPool); err != nil {
			errs = append(errs, fmt.Errorf("send pool: %w", err))
		}
	}
	// Last before the database: until the node's work stopped, no other
	// node may take its id.
	s.nodeLock.close()
	if s.closeDB != nil {
		closePart(s.closeDB)
	}
	return errors.Join(errs...)
}
