package store

// PresenceStartedSQLForTest is presenceStartedSQL, for the review probe's
// EXPLAIN.
func PresenceStartedSQLForTest() string { return presenceStartedSQL }
