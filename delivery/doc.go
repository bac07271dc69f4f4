// Package delivery moves committed events to connected MQTT sessions, in
// seq order per conversation, with PostgreSQL as the source of truth.
//
// The Hub receives every committed change through Notify (called after
// commit, never blocking the publisher) and fans it out on its own goroutine
// to the sessions of the conversation's members. Each connected session has
// one pump goroutine that owns all of that session's delivery state:
//
//   - per conversation, the next seq to hand to the client. A live event
//     with exactly that seq is sent; a duplicate is dropped; a gap is held
//     briefly for reordering and otherwise filled from PostgreSQL (SinceMany: one query for many conversations),
//     so a lost, reordered or cross-node event never leaves a hole;
//   - a bounded window of unacknowledged QoS1 publishes (its own packet ids,
//     not mochi's inflight map), advanced by the client's PUBACKs;
//   - the delivered cursor (highest acknowledged seq per conversation),
//     flushed in batches by the Hub's cursor writer, from which a persistent
//     session resumes after a reconnect, a takeover or a server restart.
//
// Catching up is cheap when it can be: the Hub keeps the encoded
// message.new of the newest messages of recently active conversations
// (recent.go; Options.RecentPerConv, RecentBytes), and a session that fell
// behind takes them from there instead of reading and re-encoding them from
// PostgreSQL once per member. The cache only serves what the fan-out saw; a
// session ends its catch-up from it only past the highest seq the fan-out
// saw for the conversation and past the newest seq it knows committed
// (its cursor's last_seq, or a dropped live event), and after the hub
// dropped events (overflow) it asks PostgreSQL. Anything else is a miss
// that PostgreSQL answers.
//
// Writes are batched: every PUBACK already waiting is taken before the
// pump writes again, and a session whose window filled refills it in bursts
// of a quarter window, so a busy server writes many publishes per system
// call instead of one per acknowledgement.
//
// Nothing here blocks on a client: Notify and the fan-out only do
// non-blocking sends into bounded queues. A session whose queue overflows
// drops it and catches up from PostgreSQL; a session that leaves its window
// full, or a write blocked, for longer than SlowTimeout is disconnected and
// resumes from its cursor when it reconnects.
//
// Duplicates with the same (conversationId, seq) are possible after a crash
// (cursors are flushed in batches); losses are not.
//
// Receipts and presence: Options.OnDelivered is called by the pump on every
// PUBACK of a message.new (the member's delivered watermark, batched by the
// store's Receipts); delivery.updated is routed to the member named by its
// senderId (the sender of the delivered messages), and not at all in groups
// above LargeGroup. NotifyUsers pushes an
// event to named users' sessions (presence, which has no conversation).
package delivery
