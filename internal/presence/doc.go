// Package presence tracks which users are online and tells the users who
// share a conversation with them.
//
// # Contract
//
// A user is online while at least one of their MQTT connections is open, on
// any node. The hooks call Connected when a session is established and
// Disconnected when it ends, however it ends: DISCONNECT, a dropped socket,
// or a client gone silent (mochi closes it after 1.5 × keepalive; its Will,
// if any, is not routed). The Tracker counts connections per user in memory
// and, on a transition:
//
//   - online (first connection on this node, and its watchers were last
//     told it went offline, or nothing: so a user who left another node
//     and came back here within that node's grace is not announced
//     again): pushes {"type":"presence","userId","online":true,"lastSeen"}
//     to the users who share a conversation of at most LargeGroup
//     members;
//   - offline (last connection on this node closed, none on another live
//     node, and still none after Grace, so a quick reconnect or a takeover
//     is not reported): pushes online false with lastSeen, the one the
//     query answers (store.Presence.LastSeen).
//
// A change of who may see a user's presence (their presence setting, a
// block of theirs: PresenceVisibilityChanged) is pushed too: hidden
// (online false, no lastSeen) to the users it is now hidden from, who
// hear of none of its later changes; the current state to the watchers
// when it is shown again. A hide and a show waiting for the same round
// (a block of one user, then an unblock of another) are both pushed.
// So is the end of two users' sharing of a conversation of at most
// LargeGroup members (SharingEnded): the member.removed that ended it
// names, as the removal's transaction read them, who may no longer see
// the removed user's presence and whose presence the removed user may no
// longer see; every node gets it (its own store's, the others' through
// Kafka) and pushes hidden to those of them connected there, with no
// Kafka message of its own, except to a pair that sees each other again
// (Watching, read for those pairs alone): a join committed after the
// removal made them share another conversation, and its event, which
// gives them each other's state, may have come first (another Kafka
// partition; an earlier round). Its start (SharingStarted)
// likewise: the member.added or conversation.created that made two users
// share such a conversation for the first time maps, as the join's
// transaction read it, who may now see whose presence; every node reads
// the state of those its connected users may now see as their watchers
// were told it (one store.Presence.Announced: what the query answers, but
// online during the grace after a disconnect, which the others were not
// told of and a reconnect within it never corrects) and pushes it to
// those of them who watch them still (Watching, read then for those
// pairs alone: a block, a hide or a removal committed after the join's
// transaction told them hidden already).
//
// Presence is never stored per event. What is stored is state, in
// PostgreSQL (see store.Presence): what the user's watchers were last
// told (user_presence.announced_online; a node announces a transition by
// claiming it there, ClaimOnline and ClaimOffline, so that two nodes
// never both announce one); each node marks the sessions it holds
// (chat_session.node_id) and beats a heartbeat (chat_node); the query
// (GET /v1/users/{id}/presence, RPC presence) is answered from that state,
// so it is correct on every node, and a node that crashed stops counting
// after 3 × Heartbeat. At its next heartbeat a live node takes over what
// the crashed node left (store.Presence.ReapNodes: the flags cleared, its
// users last seen at its last heartbeat) and announces offline, as for a
// disconnect, those of its users connected nowhere now: nobody else would.
// A node restarted with the id of a process that crashed clears the flags
// that process left at Start, and their users' grace starts then: those
// who do not come back are announced offline.
// A node taken for dead while it ran (its heartbeat lapsed) finds its
// heartbeat gone at its next one (or, when that one's reply is lost, at
// the first that answers: store.Presence tells the heartbeat row's
// incarnations apart), restores its flags and announces its
// users online again (those connected then, once the claim goes through:
// a user announced online by a connection of their own meanwhile is not
// told again, nor one its own claim announced, while its heartbeats
// failed, after that node's offline: the revival's claim tells); a user
// whose grace was running then, back within it, is claimed online as a
// first connection is (that node may have announced them offline).
// Large groups (more than LargeGroup members) get no
// presence pushes; their members can query.
//
// Across nodes, a node publishes its presence events with Publish (chatd
// wires it to Kafka, the chat.events topic, with the node's origin header)
// and every other node hands them to Remote, which pushes them to its own
// watchers. Without Kafka, pushes reach only the watchers connected to the
// node where the transition happened; queries stay correct.
//
// # Concurrency
//
// Connected, Disconnected, Remote and Online are safe for concurrent use and
// never block on I/O. One goroutine owns everything else: it writes the
// connection flags (coalesced: the final state per client id; a
// connection's flag only while the session is still that connection's,
// so a write retried late, or a heartbeat's repair of the flags
// (Reassert), never takes a session a newer connection on another node
// holds), beats the
// heartbeat, decides transitions, looks up watchers and pushes. Database
// failures are retried on the next tick and logged once per change of
// state. Close(ctx) stops the goroutine after clearing this node's flags
// and heartbeat.
//
// Config.Publish must not block either: chatd wires it to a
// relay.EphemeralPublisher, which queues into a bounded queue (4,096
// events) or drops, and whose own goroutine writes the queue to Kafka, so
// a Kafka that hangs never stalls the tracker's goroutine.
//
// # Metrics
//
// chat_presence_online_users: users with at least one connection on this
// node. chat_presence_events_total{origin=local|remote}: presence events
// pushed to watchers. (chat_presence_kafka_dropped_total, events not
// published to Kafka, is the EphemeralPublisher's.)
// chat_presence_remote_dropped_total: other nodes' events dropped because
// events of 10,000 other users were waiting to be pushed here already (an
// event replaces the one of its user that waits: only the latest state
// is pushed).
package presence
