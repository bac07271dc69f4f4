package chat

// Publisher receives every change the moment it becomes visible: the store
// publishes what each write committed, right after its commit and before
// the writer's caller is answered, in commit order within a conversation;
// ephemeral events (typing, presence) are published as they happen.
// delivery.Hub implements it (fan-out to this node's sessions, then a
// wake-up of the outbox relay). Publish must not block and must not keep
// evs.
type Publisher interface {
	Publish(evs ...Event)
}

// DeliveredSink records that one of a member's sessions acknowledged
// message seq (the delivered watermark). It never blocks; the store
// flushes what it collected in batches.
type DeliveredSink interface {
	Delivered(conversationID, userID, seq int64)
}
