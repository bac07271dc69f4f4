// Package chat is the domain of the chat server: conversations, messages,
// per-conversation sequence numbers, read watermarks, membership rules and the
// typed errors every transport maps to its own codes.
//
// It imports neither the MQTT broker nor the database driver. store/
// implements Store on PostgreSQL; broker/, hooks/ and httpapi/ translate their
// protocols to Service calls and back, so MQTT, HTTP and RPC behave the same.
//
// Invariants (enforced by Store implementations, proven by the contract tests
// in store/):
//   - per conversation, committed messages have seq 1, 2, 3, ... with no gaps
//     and no duplicates;
//   - (conversation, clientMsgId) identifies one message; a resend by the same
//     sender returns the original seq, a reuse by another sender is a conflict;
//   - last_read_seq only moves forward and never past last_seq;
//   - an event (outbox row) exists if and only if its change committed.
//
// Concurrency: Service and Store are safe for concurrent use; every method
// takes a context first and honours its deadline.
package chat
