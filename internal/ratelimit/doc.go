// Package ratelimit implements chat.RateLimiter with token buckets: in
// memory on one node, or shared by every node through Redis when a Redis URL
// is configured.
//
// # Contract
//
// A bucket holds at most Burst tokens and gains Rate tokens per second; each
// Take spends one token or, when fewer than one is left, refuses and says
// when a token will be there (RetryAfter) and when the bucket will be full
// (Reset). Refund gives one token back, never above Burst. A limit whose
// Rate is 0 is unlimited and is never looked up. Buckets are named by the
// limit's kind (send, conv, read, typing, api, connect, connect_user) and a
// key (a user id, a conversation id, an IP address).
//
// With Redis the Limiter also counts each user's MQTT connections across
// nodes for the per-user connection cap (AddConn, RemoveConn,
// RefreshConns; conns.go): per user a sorted set of client ids scored by
// when they stop counting (ConnTTL after their node last refreshed them)
// and a hash of the node each is on, changed only by Lua scripts on
// Redis's clock. A client id counts once whichever node claims it, and only
// its node removes it. When Redis fails, AddConn allows and each node's own
// count is the cap, with the same fallback and logging as the buckets; the
// removals Redis did not take are made once it answers (the user's next
// AddConn, the node's next RefreshConns).
//
// Local buckets live in a sharded map, by value under the 64-bit hash of
// their names (local.go says why). A bucket that has refilled
// completely carries no information (a new one would be identical), so the
// janitor goroutine deletes those every SweepInterval (10 s), and Take sweeps a
// shard at once when it grows past MaxKeys/shards: memory is bounded by the
// keys active within one refill time.
//
// With Redis, a Lua script does read-refill-spend-write atomically on the
// Redis server, using the server's clock (TIME), so nodes with skewed clocks
// share one budget. Keys expire once they would be full again. When Redis
// fails (unreachable, timing out after Timeout), the limiter decides with
// its local buckets instead, so a node keeps enforcing per-node limits and
// never refuses because Redis is down; it logs the switch once, probes Redis
// again at most every RetryInterval, and logs once more when Redis is back.
// While degraded, each node allows its own full budget (N nodes: up to N
// times the limit).
//
// # Concurrency
//
// Take and Refund are safe for concurrent use and never block longer than
// Timeout. The janitor is the one goroutine the Limiter owns; Close(ctx)
// stops it and closes the Redis client.
//
// # Metrics
//
// chat_rate_limited_total{kind} counts refusals;
// chat_rate_limiter_redis_fallback is 1 while Redis is configured but the
// local buckets decide.
package ratelimit
