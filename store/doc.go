// Package store is the PostgreSQL implementation of chat.Store, plus the
// schema migrations runner and the connection pool settings.
//
// # Contract
//
// Every chat.Store method is one transaction. The outbox row describing a
// change is written in the transaction that makes the change, so an event
// exists if and only if its change committed; it is written only while
// outbox rows are wanted (a relay may read them: functions.sql,
// chat_want_outbox, which Migrate runs with WantOutbox), read in that
// same transaction. Rows are keyed by the
// conversation id in decimal, so a keyed consumer sees one conversation's
// events in commit order; a stream entry's row (message.new) references
// the entry, every other row carries the JSON chat.EncodeEvent writes (the
// relay encodes referencing rows with the same encoder). After the commit,
// every write hands what it committed to the chat.Publisher given with
// WithPublisher, before its caller is answered. That holds when the
// answer to the COMMIT was lost with its connection too: a send batch is
// run again on another connection (its committed changes answer
// duplicates, which are published; when that fails too, the resend of
// such a change publishes its duplicate, an ordinary resend's is not),
// and the other writes (inTx) read their transaction's id before the
// COMMIT and ask PostgreSQL what became of it (internal/pgerr:
// Committed). When it cannot tell in time, such a write's events go to
// one goroutine that asks again until it can and publishes them if the
// write committed (outcomes.go says why there and not in the Kafka
// consumer). From right before the COMMIT of a write that may change who
// belongs to a conversation, or their history floors, until its events
// were published (or it is known not to have committed), the publisher
// hears that the conversation is unsettled (chat.UnsettledPublisher):
// entries committed after it may reach the publisher before its events.
//
// What one lock serialises reaches the publisher in commit order on the
// committing node, as it reaches other nodes in outbox order: a send
// batch publishes its entries in seq order; the writes of one user's
// profile.updated (SetProfile, a Block or Unblock that tells the profile
// again) publish theirs in the order they took the profile's lock, and
// the changes of one group (changeTx: AddMember, RemoveMember,
// UpdateGroup, SetRole, TransferOwnership) theirs in the order they took
// the conversation's, locks each holds to its commit (publishOrder: a
// write takes a turn under its lock, and after its commit, holding
// nothing in PostgreSQL, waits for the publishing of the one that held
// the lock before it). Without that, two of them committing back to back
// and published by their callers' goroutines could reach a client in the
// other order: a profile.updated with the same updatedAt, which a client
// applies (a block's view overwritten by the profile as it was before
// it), or a group's conversation.updated, which carries every setting and
// which clients apply as it comes. Other writes publish on their callers'
// goroutines as they return from the commit, in no order among
// themselves: their events are ordered where they are delivered (an entry
// by its seq) or are watermarks a client keeps the highest of
// (read.updated, delivery.updated, MarkRead's and the receipt batches').
// Presence visibility is not the store's to publish (internal/presence).
//
// The schema is migrations/NNNN_*.sql, applied once each and recorded with
// their sha256 (Migrate refuses a database whose applied migrations differ
// from the binary's, or that a newer chatd migrated), and
// migrations/functions.sql, the SQL functions, re-applied by every Migrate.
//
// Outcomes a client can cause come back as *chat.Error (invalid,
// too_large, unsupported, not_member, forbidden, blocked, not_found, gone,
// conflict, member_cap, too_many_reactions; rate_limited for the daily
// upload bytes). Infrastructure
// failures (pool closed, connection refused or lost, server shutting down,
// out of resources, timeouts, cancelled contexts, serialization failures and
// deadlocks) come back as chat.Unavailable, so transports say "retry" rather
// than "bug". A COMMIT lost with its connection is unavailable too, though
// its outcome is unknown: every write here is safe to retry (Send by
// clientMsgId; MarkRead and membership changes are idempotent).
//
// Send is group-committed (batcher.go, sendbatch.go): sends that arrive while
// a transaction is in flight share the next one, each with its own
// outcome. One goroutine owns the waiting sends: a batch starts at once when
// no transaction is in flight, and beside those in flight only when the
// newest has run for 10 ms (it waits for a lock or a disk, or the load needs
// overlapping transactions) or a full batch waits. A batch never takes a
// conversation that a batch in flight holds, so concurrent batches never
// want the same conversation row, a conversation locked by something else
// stalls only its own sends, and seqs within a conversation follow arrival
// order. A batch is one round trip: BEGIN, a call of the SQL function
// chat_send_batch (migrations/functions.sql, the only code that writes a
// message: it locks, decides every send's outcome with set-based SQL after
// the locks are granted, and writes) and COMMIT, pipelined; a lone send is
// a batch of one. A plain batch (messages that neither reply nor forward,
// and system entries) calls chat_send_batch_plain instead: the same
// arguments and answer, made by functions.sql from chat_send_batch's own
// text with the lifecycle's marked parts left out, so the rules stay
// written once while a plain send skips the executor start-up of
// expressions only edits, recalls, reactions, replies and forwards use
// (docs/benchmarks.md, "A plain batch's own function"). A plain batch
// with no two changes in one conversation (a lone send, and most small
// batches) calls chat_send_batch_plain_distinct, made from the plain one's
// text the same way without the windows and groupings that only a
// conversation with several changes needs (docs/benchmarks.md, "A plain
// batch of distinct conversations"). It locks its conversation rows in id order and its member
// rows in key order, the order every other writer uses, so batches never
// deadlock. The batch publishes its messages' message.new in commit order. The batch's deadline, its most impatient caller's, is
// enforced by PostgreSQL (statement_timeout on the call) and chatd waits
// for the answer: the COMMIT is already in the pipeline, so a cancel from
// chatd's side could lose the race against it and a send answered
// "unavailable" would commit anyway.
//
// With WithTracer, a change whose caller's span records gets a chat.commit
// span from queued to answered, and every transaction serving one a
// chat.batch span of its own, linked both ways (one batch serves many
// traces). The caller's trace context, sampled or not, is written into
// the change's outbox row (traceparent, tracestate: migration 0016) and
// the published event (chat.Event.Trace), so the fan-out and the Kafka
// record continue its trace. Without it nothing is traced and those
// columns stay NULL.
//
// Performance rules, each measured (docs/benchmarks.md):
//
//   - Pools plan every execution (plan_cache_mode=force_custom_plan): a
//     generic plan cached on a fresh, unanalyzed database scans whole tables
//     for the rest of the connection's life. chat_send_batch, whose
//     statements are all per-element key lookups written as LATERAL ...
//     LIMIT 1, caches generic plans instead: planning them on each call
//     took 0.9 ms of a 1.5 ms call.
//   - Hot writers (send batches, receipt batches) silence the outbox
//     trigger's NOTIFY for their transaction and wake the relay after
//     COMMIT (migration 0006): a NOTIFY inside a writing transaction holds
//     PostgreSQL's global notify lock through the WAL flush and serialises
//     every such commit. Send batches leave the wake-up to one goroutine
//     of the batcher (relayWaker), off the PUBACK's path. They skip it
//     when WithRelayWake says no relay elsewhere listens (no Kafka, or
//     this node's relay leads and is kicked in-process), which would be
//     a transaction per batch that nobody hears.
//   - Delivered-watermark batches write member_delivery, not the member
//     rows that sends lock for the sender's read watermark, so that
//     neither waits for the other's commits. The delivered
//     watermark is the greater of the two tables'; every reader reads
//     members through the view member_watermark, which says so once.
//     What moves and the events are read first without locks, and the
//     batch is one round trip (receipts.go).
//
// # Concurrency rules
//
// The conversation row is the lock that serialises every change to a
// conversation's messages and membership:
//
//   - Send takes SELECT ... FOR UPDATE on the conversation row, and only then
//     (in a new statement, hence a fresh READ COMMITTED snapshot) checks
//     membership and the clientMsgId. Seq is last_seq+1 under that lock, so
//     committed seqs have no gaps and no duplicates, and two concurrent sends
//     of one clientMsgId resolve to one message. A rolled-back send releases
//     the lock with last_seq untouched, so it leaves no gap either.
//   - AddMember and RemoveMember take the same lock, so the member cap and
//     the role checks cannot race each other or a concurrent send. A
//     group's size is conversation.member_count, which statement triggers
//     on conversation_member keep under that lock (migration 0052): the
//     cap, a connect's cursors and the presence and profile audiences read
//     it instead of counting member rows. A
//     change that writes two member rows (the owner leaving and the
//     successor taking over, a transfer) locks both first, in user id
//     order (lockMembers), as read and send batches do.
//   - MarkRead does not take the conversation lock: it is a single
//     conditional UPDATE of the member row (row-locked by PostgreSQL and
//     re-evaluated after a wait), clamped to the conversation's last_seq, so
//     the watermark only moves forward and never past last_seq.
//   - A write that makes the one row a key names (OpenDirect: the pair's
//     direct_pair; a keyed CreateGroup: group_create; a keyed upload:
//     upload_create) claims the key with claimKey: INSERT ... ON CONFLICT
//     DO NOTHING under a savepoint, and on losing the race the savepoint
//     is rolled back and the winner's row re-read.
//   - Block, Unblock, OpenDirect and the adds that refuse a blocker
//     (AddMember, CreateGroup: refuseBlockers) take an advisory lock per
//     pair of users (lockPairs, in the other user's id order) before they
//     read or write user_block: an add sees a block committed before it,
//     and a block waits for an add in progress to commit. A block first
//     takes a lock of the blocker's own (roomForBlock), so that two blocks
//     racing at chat.MaxBlocksPerUser cannot both see room; only blocks
//     take it, always before the pair's. Under the pair's lock a block or
//     unblock then takes the pair's direct conversation row lock, as a send
//     does, before it writes the blocked member's peer_blocked: a send in
//     flight commits before the block, and a later one reads it.
//   - SetProfile, and a Block or Unblock that tells the blocker's profile
//     again (setBlock), take the profile's lock (lockProfile; a block
//     after the pair's) and read the profile's audience under it
//     (profileAudience, chat.ProfileAudience): a profile write that read
//     its audience before a block commits before the block reads the
//     profile, and one after it reads the block.
//   - A membership change that tells presence (AddMember, RemoveMember,
//     CreateGroup, OpenDirect creating the pair's conversation) decides,
//     per pair of the user who joined or left and the conversation's
//     members, whether they start or stop sharing a conversation of at
//     most CHAT_LARGE_GROUP members, by reading their other
//     conversations. Two such changes that decide about one pair (X
//     joins or leaves C while Y joins or leaves D, X in D and Y in C,
//     or X = Y) would each read the other's conversation as it was
//     before the other committed, and tell wrong: the pair told hidden
//     while it shares C, or never told hidden once it shares nothing.
//     So each first takes (lockSharing) an advisory lock per user: the
//     joining or leaving users' exclusive, the conversation's other
//     members' shared, in key order, after every other lock the change
//     takes (the conversation's, the pairs') and before it reads, so
//     they add no deadlock. Two such changes deciding about a pair in common
//     then wait for each other (as do those where one's user is a member
//     of the other's conversation), and the later reads the earlier's
//     commit; changes of other users in groups of the same members take
//     each other's locks shared only and wait for nothing, and sends
//     take none.
//   - Reads (History, Inbox, SeenBy, GetConversation) run in a read-only
//     REPEATABLE READ transaction so the membership check and the data come
//     from one snapshot.
//
// Writers that need both lock the conversation row before any member row,
// and MarkRead locks only its member row, so the operations cannot deadlock
// each other. Delivered batches lock only member_delivery rows, in key
// order; the only other writer there is a member's removal (a trigger
// deletes the member's row), which waits for them and holds nothing they
// want.
//
// Store holds the pools, the limits and the send batcher (one goroutine
// owns the waiting sends; a few workers run their transactions) and is safe
// for concurrent use. Every call honours its context's deadline.
package store
