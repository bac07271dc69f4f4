// Package delivery moves committed events to connected MQTT sessions, in
// seq order per conversation, with PostgreSQL as the source of truth. It
// depends on the domain (package chat) alone: the store of record is a
// chat.DeliveryStore, a client connection a chat.Conn, and the Hub is the
// node's chat.Publisher and the transports' chat.Delivery.
//
// # Goroutines
//
//   - The fan-out goroutine receives every event through Publish or
//     Deliver (never blocking the caller: a full queue makes every session
//     catch up from PostgreSQL instead) and routes it to the sessions of
//     the conversation's members. It owns the member index (members.go):
//     members are read by a few loader goroutines, never by the fan-out
//     itself; an event of a conversation whose members are being loaded
//     waits, with the later events of that conversation and in order,
//     while every other conversation's events go on. Membership events
//     keep the index current; past MemberIndexSize conversations the least
//     recently routed one is forgotten. A membership event older than the
//     members loaded (Routing.Seq) or than one of the same member the
//     index applied (remembered across a reload) changes nothing, and one older than the latter is
//     not routed either: it came late (a relay leader's batch landing
//     after its successor's, Kafka redelivering, another node's event
//     overtaken by this node's own), and would end the stream of a member
//     who is back. So is a conversation.updated older than one the index
//     saw of the group, and a member.updated older than one of the same
//     member: each is a whole state (the settings, a role), and clients
//     apply it as it comes.
//   - Each connected session has a pump (session.go), the only writer to
//     its client: the acknowledgements of the client's own publishes
//     (Reply; in order, never dropped), its events and RPC replies. The
//     pump holds no goroutine while the session is idle: offer, Acked,
//     Reply and the rest leave work in the session's mailbox and start the
//     pump if it does not run (a PUBACK that finds the pump asleep and
//     releases nothing the window held back is taken by Acked's caller in
//     the pump's place: it is bookkeeping, and most PUBACKs are such): on one of the hub's pump workers (a few
//     goroutines that keep the stack a pump grows) when one is idle, else
//     on a goroutine of its own, so no session waits behind another; the
//     pump takes the mailbox, sends, and ends when nothing is left,
//     releasing what a burst grew, with a timer (no goroutine) armed for
//     what is due later: a gap's timeout, the slow-consumer check of a
//     full window, a catch-up retry. Past
//     QueueSize live events waiting, the session drops them and catches up
//     from PostgreSQL. What to send is decided
//     by one stream per conversation (stream.go), a pure state machine:
//     Live (the next live event goes out), Gapped (later events held while
//     a missing seq is awaited, up to GapWait) and Behind (catch-up must
//     fetch what PostgreSQL holds first). Catch-up (catchup.go) asks the
//     hub's recent cache first, then PostgreSQL (SinceMany: one query for
//     many conversations, which hides what the user may not read).
//   - The cursor writer (internal/coalesce) flushes delivered cursors,
//     merged per (client, conversation), once per CursorFlush; a stopping
//     session flushes its own at once.
//   - The watchdog disconnects sessions whose write has been blocked
//     longer than SlowTimeout without progress (on a chat.AckedConn, its
//     client's TCP acknowledging more counts: Linux may hold a write back
//     until a third of a send buffer of megabytes drained, minutes for a
//     client reading some KiB a second), or, once Close began, longer
//     than a second whatever the progress: a session must stop (and save
//     its cursors) within the shutdown's budget.
//
// # Windows, cursors and receipts
//
// A session keeps a bounded window of unacknowledged QoS 1 publishes (its
// own packet ids, not mochi's inflight map), advanced by the client's
// PUBACKs (Acked): Options.Window, or the client's Receive Maximum when
// that is smaller (Attach). A session whose window stays full with no PUBACK
// for longer than SlowTimeout (counted from when it filled, or from the
// last PUBACK since) is disconnected and resumes from its cursor when it
// reconnects. Writes are batched: every PUBACK already waiting is taken
// before the pump writes again, and a session whose window filled refills
// it in bursts of a quarter window, so a busy server writes many publishes
// per system call. The delivered cursor (the highest seq with everything
// before it acknowledged) is what a persistent session resumes from after
// a reconnect, a takeover or a restart. Every PUBACK of an entry someone
// else wrote is also handed to Options.Delivered (the member's delivered
// watermark); of one the user wrote, not: writing it moved their read
// watermark to it (chat.Event.Writer).
// Duplicates with the same (conversationId, seq) are possible after a
// crash (cursors are flushed in batches); losses are not.
//
// # Recent cache
//
// The Hub keeps the encoded message.new of the newest messages of
// recently active conversations (recent.go; RecentPerConv, RecentBytes:
// every byte it holds counts, its rings grow with their conversations), so
// a session that fell behind takes them from memory instead of reading and
// re-encoding them once per member. It only serves what the fan-out saw; a
// stream ends its catch-up from it only past the highest seq the fan-out
// saw for the conversation and past the newest seq it knows committed, and
// after the hub dropped events (overflow) it asks PostgreSQL. A stream
// that knows of a committed seq the fan-out has not seen (another node's
// entry the relay has not brought yet) is served nothing from it: that
// entry may recall a message it holds, and a recall forgets the
// conversation's entries only once the fan-out sees it. It takes from
// it nothing past that newest seq: the cache holds what was routed to
// anyone, and an entry past it may have been routed after the user's
// leave, whose member.removed is still in the session's mailbox. Its payloads
// are shared by all members, so it ends a stream's catch-up before an edit
// of a message at or before the user's join_seq (the most their history
// floor can be, whatever the group's visibility is or becomes):
// PostgreSQL answers that edit, without its body if the user may not read
// it.
//
// # Routing
//
// message.new goes to every member (without body above LargeGroup
// members; what a membership that ended still owes goes whole, since
// history refuses a user who is no longer a member: stream.slim);
// message.edited to every member, its body emptied for those whose
// history floor reaches the message it rewrites (a member added to
// a group whose history is "joined" reads nothing from before their join:
// history, catch-up and the fan-out hide by one rule,
// chat.FloorHidesEdit); typing to the members but its sender, at QoS 0,
// written by a session only in a conversation it follows as a member and
// once its stream has every seq up to the typing's (the conversation's
// last_seq when the typist was checked; not sent to clients), so a member
// removed on another node, still in the index until the relay brings the
// removal, is never shown one;
// delivery.updated to the member named by its senderId (the sender of the
// delivered messages), and not at all in groups above LargeGroup; an event
// with Event.To and no conversation (presence, profile.updated) to the
// users named there; read.updated to the members, except as the read
// receipt settings its event carries say (privacy.go); system.new is an
// entry like message.new; membership events start and stop the members'
// streams. Every other event of a conversation (read.updated,
// delivery.updated, member.*, conversation.updated) is written by a
// session, like typing, only once its stream has every entry up to the
// event's place in the conversation (its seq: the entry it came with, or
// the last_seq at the time; read.updated's and delivery.updated's is
// Event.LastSeq, their seq being the watermark): it waits for that
// (Session.later), as an entry past a missing seq does (GapWait after the
// last of those entries came in order, then catch-up); a clean session's
// stream that has sent nothing yet may still be handed an entry at or
// before its start, routed late, which it delivers (stream.rewound), so
// an event at or before that start waits for such an entry too, GapWait
// once per stream (stream.has; a resync, whose last_seq says nothing of
// such an entry, does not end that wait), and is dropped
// when the membership the stream follows ends before it or began after
// it, so a member removed on another node gets none committed after their
// removal, nor one added back any committed while they were away. At most
// QueueSize such events wait per session, with a count per conversation
// that has any: a removed member's conversation whose removal the relay
// does not bring holds its events for good, and must not take the room
// of another conversation's, which wait for entries on their way. Past
// QueueSize, an event of the conversation with the most waiting (or as
// many as any) is dropped, and any other takes the place of the event
// that has waited longest of the conversations with the most (waitList).
// One for a conversation the session has no stream of waits for the
// session to re-read its conversations: a member added on another node,
// whom the index lists before the relay brings the join, gets what
// follows the join.
//
// # Membership
//
// The fan-out routes by its member index; a session delivers by its own
// streams, which come from PostgreSQL (its conversations, read when it
// starts and at every resync) and from the joins and leaves routed to it.
// The two can disagree for a moment: members loaded after a change that
// committed behind the events waiting for them, or a membership event the
// hub dropped in an overflow. The session's word decides: an entry of a
// conversation it has no stream for is not delivered, and the session
// re-reads its conversations from PostgreSQL (catch-up then delivers the
// entry if it is the user's). A join starts a stream after its seq; a
// leave carries the last seq the user is owed, and a stream that has not
// reached it fetches the rest from PostgreSQL before it ends. A join and
// the event that announces it (member.added, conversation.created), and a
// leave and its member.removed, reach the session in one offer: the
// stream a join starts may catch up from PostgreSQL at once, and the
// event must go out before what that brings. A join or
// leave that arrives with a resync applies before the positions are
// re-read; the entries that arrive with it are dropped (catch-up reads
// them back), every other event (presence, receipts) is kept. PostgreSQL answers catch-up only as far as the user's
// membership goes as it is when the query runs (a stream that is ending,
// up to its end): a leave or a leave and re-add that committed before the
// session heard of it gives the session nothing committed after the leave.
// A join that reaches a stream still finishing what the old membership
// owed lets it finish first: the stream then goes on after the join, and
// nothing committed in between reaches the user. One past the join of a
// stream that follows a membership as lasting says a leave came between
// them that the session has not heard of (another node's, the relay late;
// older than the join, the fan-out does not route it at all): the session
// re-reads its conversations. Later leaves and joins
// queue behind it the same way: the stream follows each membership in
// turn, from its join to its leave, and the newest one live. A persistent
// session's stored cursor keeps every such membership across a reconnect,
// however many leaves and re-adds happened while it was connected or away:
// the first leave's end_seq stays on the cursor until it is acknowledged,
// and each later membership that ends meanwhile is recorded after it
// (owed_joins, owed_ends). Cursors returns them as End, Rejoins and the
// current JoinSeq, and the session rebuilds the stream's queue of
// memberships from them (stream.follow), as it does at a resync for a
// stream that missed some of those changes. A join or leave that the
// fan-out routes only after the stored cursors holding it were read (it
// lagged behind a connect or a resync) changes nothing: the stream
// follows it already, or, in a conversation whose stream has ended since
// (everything owed was acknowledged) or was owed nothing, it was over
// already (Session.noteRead, Session.left). Nor does a leave older than
// the join of the membership a stream follows (a member index that forgot
// the conversation routes a late removal again): the user was added back
// since, and its member.removed is not written either (Session.leftBefore). A leave and a re-add that
// both never reached a session without stored cursors (lost to an
// overflow) show at the resync as a join past the stream: it restarts at
// that join, and what the old membership still owed is given up. After an overflow the member index
// is emptied, and a load under way then is read again, so no dropped
// membership change leaves it wrong. A conversation the store calls
// unsettled (Unsettled: a change of its members is committing, or its
// COMMIT lost its answer and the store has not learnt its outcome; its
// events are not published yet) has its members
// read again for each of its events, after the event arrived, so after
// its commit, until Settled, which the fan-out applies in its turn after
// the events published before it: a removal or join committed meanwhile
// is what each event is routed by. Events that arrived while a load was
// under way wait for one of their own.
//
// The member index keeps each member's history floor, read with the
// members. A member.added or conversation.updated that arrives forgets the
// conversation and waits for a load, which reads the floors as they are:
// neither event says them (a join's floor depends on the group's history
// visibility; a settings change may change every floor). A
// conversation.updated that waited for a load, which may have read the
// floors before it, forgets the conversation again once routed: the
// events after it wait for a load of their own. A user who left
// has no floor left to read: catch-up finishing what they were owed gives
// them no edit's body in a "joined" group.
package delivery
