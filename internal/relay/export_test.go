package relay

// StatsSQL and StatsExact are the backlog measure's statement and the
// backlog up to which it counts exactly.
const (
	StatsSQL   = statsSQL
	StatsExact = statsExact
)
