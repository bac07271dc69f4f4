package relay

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// StatsSQL and StatsExact are the backlog measure's statement and the
// backlog up to which it counts exactly.
const (
	StatsSQL   = statsSQL
	StatsExact = statsExact
)

// Connect opens the relay's dedicated session as Run does.
func Connect(ctx context.Context, r *Relay) (*pgx.Conn, error) { return r.connect(ctx) }
