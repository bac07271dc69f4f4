package server

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/chatd/chatd/config"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WithBodyTimeout gives request bodies d to arrive instead of
// requestBodyTimeout (60 s).
func WithBodyTimeout(d time.Duration) Option { return func(s *Server) { s.bodyTimeout = d } }

// WithTransferIdle gives an upload and a download d, instead of 60 s, to
// deliver or take a piece.
func WithTransferIdle(d time.Duration) Option { return func(s *Server) { s.transferIdle = d } }

// WithSlowTimeout disconnects a session as a slow consumer after d,
// instead of 30 s, without progress (delivery.Options.SlowTimeout).
func WithSlowTimeout(d time.Duration) Option { return func(s *Server) { s.slowTimeout = d } }

// WithThumbnailWait has completing an image upload wait up to d, instead
// of 5 s, for its thumbnail (attach.Config.ThumbnailWait).
func WithThumbnailWait(d time.Duration) Option { return func(s *Server) { s.thumbnailWait = d } }

// WithoutTakeoverWatch starts a node that is not told when a connection on
// another node takes one of its sessions over, as when that notice is late
// or lost: the old connection stays open meanwhile.
func WithoutTakeoverWatch() Option { return func(s *Server) { s.noTakeoverWatch = true } }

// ObjectStoreOrigin is what the web client's Content-Security-Policy
// lets the page connect to besides its own origin.
var ObjectStoreOrigin = objectStoreOrigin

// WithWorker runs run, named name, with the node's background workers;
// run gets the node's pool.
func WithWorker(name string, run func(context.Context, *pgxpool.Pool) error) Option {
	return func(s *Server) {
		s.extraWorkers = append(s.extraWorkers, worker{name, func(ctx context.Context) error { return run(ctx, s.Pool) }})
	}
}

// ClaimNodeIDSession opens the session that holds the claim of node id id
// and tries the claim on it, as a starting node does; the session is
// returned open whenever err is nil.
func ClaimNodeIDSession(ctx context.Context, cfg *pgx.ConnConfig, id string) (*pgx.Conn, bool, error) {
	return (&nodeLock{id: id, cfg: cfg}).try(ctx)
}

// KeepNodeID claims node id id as a starting node does, checking its
// session after check without a notification; release ends the claim.
func KeepNodeID(ctx context.Context, cfg *pgx.ConnConfig, id string, log *slog.Logger, check time.Duration) (release func(), err error) {
	l, err := claimNodeID(ctx, cfg, config.Settings{NodeID: id}, log, check)
	if err != nil {
		return nil, err
	}
	return l.close, nil
}

// HTTPConns are the connections of ip's address (an IPv6 one: its /64)
// on the HTTP listeners: counted against max_idle_http_connections_per_ip (new,
// no request yet, or idle), and tracked (counted, or serving a request).
func (s *Server) HTTPConns(ip string) (counted, tracked int) {
	return s.ops.httpCaps.Conns(netip.MustParseAddr(ip))
}

// HTTPConnsArriving is how many idle HTTP connections of ip's address have
// had bytes of a next request arrive (conncap.HTTP.Arriving).
func (s *Server) HTTPConnsArriving(ip string) int {
	return s.ops.httpCaps.Arriving(netip.MustParseAddr(ip))
}
