// Package relay moves committed chat events from PostgreSQL's outbox table to
// Kafka and back out to the chatd nodes, and carries the events that are
// never stored (presence, typing) between the nodes the same way.
//
// # Relay (outbox → Kafka)
//
// Every committed change writes one outbox row in its own transaction
// (msg_key = conversation id, type = event type), while outbox rows are
// wanted (migrations/functions.sql, chat_want_outbox: a node with Kafka
// turns them on before its relay starts, and a leading Relay renews
// them every minute): a stream entry's row
// (message.new) references the entry by (conversation_id, seq), every
// other row carries its event JSON (payload). A Relay publishes those rows
// to the topic chat.events (Config.Topic), which it creates before its
// first write if it does not exist yet (with Config.Partitions partitions:
// a write to a missing topic would have the broker create it with its
// default count, and ephemeral events are never written to one):
//
//   - in id order, keyed by conversation id, with kafka.Hash so a
//     conversation always lands on one partition, and RequiredAcks =
//     RequireAll; the Kafka value is the chat.Event written by
//     chat.EncodeEvent (the encoder of every event JSON chatd sends) with
//     "eventId" (the outbox id) set, a referencing row encoded from its
//     entry as the entry is when relayed, but for a reply's quote, which
//     is the message it quotes as it was at the reply (what the
//     committing node delivered live); headers "eventId", "type" and
//     "origin" (the committing node's application name, "chatd:<node
//     id>"), and for a row written by a traced change "traceparent" (and
//     "tracestate"): with Config.Tracer the context of the row's
//     chat.relay.publish span, a child of the stored context, else the
//     stored context itself; timestamp = row created_at;
//   - a row is deleted only after Kafka acknowledged it; a failed write
//     leaves its rows in place and is retried, oldest first, with
//     exponential backoff and full jitter (BackoffMin..BackoffMax). While
//     Kafka is down rows accumulate, chat keeps committing, and the backlog
//     drains in order when Kafka returns;
//   - one node relays at a time: the leader holds a session advisory lock
//     (Config.LockKey) on a dedicated connection, which also carries LISTEN
//     and the relay's queries, so a leader that loses its session stops
//     publishing. Standby nodes try the lock every LeaseInterval and take
//     over when the leader stops or dies (PostgreSQL releases the lock with
//     the session). With one publisher and key-stable partitioning,
//     per-conversation order holds across relays and no row is published
//     twice in normal operation, including a graceful hand-over: a stopping
//     leader finishes and deletes its last batch before releasing the lock.
//     A leader whose Kafka writes have failed for HandOverAfter (30s) while
//     another relay session is connected (standing by) hands the lease
//     over the same way (its writer closed, so nothing of it is still in
//     flight; the lock released, its session kept) and tries it again only
//     after three LeaseIntervals: a node cut off from Kafka on its own (its
//     network, its settings) no longer holds the outbox back from every
//     node while another could publish it. When Kafka is down for all, the
//     lease passes between them every HandOverAfter, rows waiting in order;
//   - it wakes on Kick (in-process, called by the send path after commit),
//     on NOTIFY chat_outbox (a statement-level trigger, migration 0003, for
//     rows committed by other nodes; their hot write paths send it only
//     while they do not lead themselves, see Leading), and on a slow
//     safety poll (PollInterval); it then drains everything that
//     accumulated in batches of up to BatchSize rows / MaxBatchBytes.
//
// The relay reads the rows visible when it reads, lowest id first, and
// holds no gap open for an id that a transaction still in flight took:
// the rows of one key whose order matters are inserted under the lock
// that orders their changes (a conversation row's, a user's profile
// lock: see the store package), so after the previous holder committed,
// and PostgreSQL makes a commit visible before it releases its locks. Of
// one key's rows a higher id is a later commit, and a read that sees it
// sees every lower one; rows of other keys may become visible out of id
// order, and Kafka orders nothing across keys.
//
// Delivery is at least once: a crash or a lost acknowledgement between the
// Kafka write and the DELETE publishes the affected rows again, after the
// originals. A row larger than MaxBatchBytes can never be produced; it is
// dropped with an error log and chat_relay_errors_total{kind="oversize"};
// so is a row that cannot be encoded (kind="decode"). A broker whose limit
// on one partition's request (the topic's max.message.bytes) is below
// MaxBatchBytes, or whose log segment.bytes is (RECORD_LIST_TOO_LARGE,
// taken as MessageSizeTooLarge is: refusedTooLarge), refuses a batch of
// many rows as too large, every time:
// the relay then writes batches of half the refused write's bytes (until
// it next takes the lease), and drops, as oversize, a row Kafka refuses
// on its own. So is dropped, as kind="refused", a row Kafka refuses on its
// own for what it is otherwise (refusedForGood: INVALID_TIMESTAMP, an old
// backlog and a topic's message.timestamp.before.max.ms; INVALID_RECORD);
// a batch refused so is written one row at a time until the row is found.
// Every other write error is retried: it is of the moment or of the
// cluster's settings, and no row is to blame.
// The partition of a conversation is hash(key) mod partitions, so add
// partitions to chat.events only knowing that it reorders conversations
// across the change. docs/events.md documents the payloads and the
// de-duplication rules for consumers.
//
// # Consumer (Kafka → node)
//
// A Consumer reads chat.events in a consumer group of its own per node
// ("chatd-" + NodeID), so every node sees every event, starting, for a new
// group, at the newest offset: a node needs the events from when it started;
// clients recover older ones from PostgreSQL. Consumer.Pin fixes that offset
// (commits it for the new group) before the node accepts clients, rather
// than when the group is first joined, which Kafka delays by seconds: an
// event relayed in between would otherwise never reach the node. When Pin
// fails (Kafka unreachable as the node starts), Run pins before it joins,
// retrying until Kafka answers, and calls ConsumerConfig.Resync: what was
// relayed meanwhile the node's sessions then read from PostgreSQL. It calls
// Handler for every event and commits the offset after Handler returned.
// Handler runs on Run's goroutine, one event at a time: whatever it waits
// for holds up every event behind it, on every partition, so it must not
// wait for PostgreSQL. chatd's handler hands events to the delivery hub's
// queue, and reads the audience of another node's profile.updated (who
// shares a conversation with its user, and which of them the user
// blocked) on a goroutine of its own, which
// keeps each user's changes in order and lets a newer one replace one
// still waiting. A
// node that restarts with the same NodeID resumes from its committed
// offset; of what was written while it was down it hands on the stored
// events but no presence or typing event (live notifications, which
// reached the clients connected then): it drops those whose timestamp is
// before the Consumer was made.
// Two consumers running with one NodeID would share the group, each
// handling only the partitions Kafka assigned it, and skip each other's
// events as their own (SkipOrigin): chatd refuses to start a node whose id
// another running node of the database holds (a PostgreSQL advisory lock
// the node keeps for its life, see docs/operations.md).
//
// The consumer never has the broker create the topic: kafka-go's
// consumer group asks for the topic's partitions in Metadata requests
// that allow auto creation (which a broker with auto.create.topics.enable
// honours, with its default partition count), so the consumer's
// connections clear that flag (dialNoAutoCreate).
//
// A record's traceparent and tracestate headers become the event's
// chat.Event.Trace (DecodeEvent); with ConsumerConfig.Tracer the handler
// runs in a chat.relay.consume span continuing that trace, and the event
// carries that span's context on to the fan-out.
//
// The "origin" header names the node that committed an event (whichever
// node relays it); ConsumerConfig.SkipOrigin drops the events a node
// committed itself, which it already delivered in-process. Any event may
// still arrive twice (at-least-once relaying), so handlers must be
// idempotent: the delivery layer de-duplicates message.new by
// (conversationId, seq) and read.updated by (conversationId, userId, seq).
// eventId is the Kafka record's identity, for consumers outside chatd: the
// delivery hub leaves it out of what clients get, so an event relayed from
// another node reaches them in the shape the committing node sends.
//
// # Ephemeral events (node → Kafka)
//
// Presence and typing are never stored, so the outbox does not carry them:
// an EphemeralPublisher per kind writes a node's own events to chat.events
// directly, best effort, with the headers type and origin (the node's
// application name, which its own consumer skips like its outbox events)
// and the key EphemeralKey gives: "user:<id>" for presence, the
// conversation id for typing, as the relay keys the conversation's stored
// events. Publish never waits: it queues (at most 4,096 events per kind)
// or drops and counts, and the publisher's goroutine encodes and writes
// the queue, each record's timestamp the time of its Publish; a write
// that fails is logged once per change of state and its events dropped,
// and a typing indicator that waited longer than it is shown (3 s) is
// dropped rather than written. The other nodes' consumers hand them on
// like any event; chatd's handler gives presence to the presence tracker
// and typing to the delivery hub.
//
// # Pruner (no Kafka)
//
// Without Kafka nothing consumes the outbox; a Pruner deletes rows older
// than a retention (default 1h) every minute so the table stays bounded,
// and turns outbox rows off (nothing writes them any more) once no relay
// has wanted them for the retention, none holds the lease and no relay
// session is connected. While a relay holds the lease or stands by for it
// (its session connected: the lease is free for a moment when a leader
// goes, and a leader whose database statement failed stands by on a
// fresh session, opened before the failed one closes, through its
// backoff) it deletes nothing. Run either a Relay or a Pruner, never both.
//
// # Concurrency and lifecycle
//
// Relay, Consumer and Pruner each have a Run(ctx) method that owns all of
// the value's work on the caller's goroutine (plus kafka-go's internal
// goroutines, which Run closes before it returns); Run may be called once,
// returns nil when ctx is cancelled, and leaves no goroutine behind.
// Infrastructure failures never end Run: they are retried, logged once per
// change of state (never with message bodies) and counted. Relay.Kick is
// safe for concurrent use and never blocks. A stopping Relay waits for its
// in-flight Kafka write, at most WriteTimeout.
//
// # Metrics
//
// Registered on the prometheus.Registerer passed in the config:
// chat_relay_lag_seconds and chat_relay_pending_rows (measured by the leader
// every StatsInterval and after each drain; 0 on standby nodes, so
// aggregate with max), chat_relay_published_total, chat_relay_errors_total
// {kind=kafka|db|oversize|refused|decode} (each at 0 from the start), chat_relay_batch_size, chat_relay_leader (0/1),
// chat_kafka_consumer_events_total, chat_kafka_consumer_errors_total
// {kind=kafka|decode} (each failure once: kafka-go reports a failure of
// the consumer group up to three times, logged by the group, logged again
// by the reader and, the last of MaxAttempts in a row, returned by
// FetchMessage), chat_kafka_consumer_lag_events (events in Kafka the
// handler has not returned from, as of the latest fetch of each
// partition), chat_outbox_pruned_total, chat_outbox_pruner_errors_total
// and, per kind of ephemeral event, chat_presence_kafka_dropped_total and
// chat_typing_kafka_dropped_total (queue full or write failed; for typing
// also an indicator that waited for Kafka longer than typingFresh, 3 s).
package relay
