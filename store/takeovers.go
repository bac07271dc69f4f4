package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/retry"
)

// TakeoverChannel is the channel on which chat_session_open announces that
// a connection took a session over from a connection of another chatd
// process (migrations/functions.sql).
const TakeoverChannel = "chat_session_takeover"

// WatchTakeovers calls taken(clientID, token) for every session that a
// connection of another chatd process took over from the connection
// token, for as long as ctx lives: token's node closes that connection
// (MQTT-3.1.4-3). It listens on a connection of its own and, when that
// fails, connects again with backoff; a takeover announced meanwhile is
// missed, and its old connection then stays open until its keepalive runs
// out, as any half-open connection does (its end leaves the session
// alone). taken runs on WatchTakeovers' goroutine and must not block. It
// returns when ctx ends.
func (s *Sessions) WatchTakeovers(ctx context.Context, taken func(clientID, token string), log *slog.Logger) error {
	for attempt := 0; ; {
		err := s.watchTakeovers(ctx, taken, log, func() { attempt = 0 })
		if ctx.Err() != nil {
			return nil
		}
		attempt++
		log.Warn("watching session takeovers failed; listening again", "attempt", attempt, "err", err)
		if !retry.Sleep(ctx, retry.Backoff(attempt, 100*time.Millisecond, 10*time.Second)) {
			return nil
		}
	}
}

func (s *Sessions) watchTakeovers(ctx context.Context, taken func(clientID, token string), log *slog.Logger, listening func()) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "chatd-takeovers"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// Keepalives notice a database that went away while the connection
	// only waits (WaitForNotification would wait for ever).
	if _, err := conn.Exec(ctx, `SELECT set_config('tcp_keepalives_idle', '10', false),
		set_config('tcp_keepalives_interval', '5', false), set_config('tcp_keepalives_count', '3', false)`); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+TakeoverChannel); err != nil {
		return fmt.Errorf("listen %s: %w", TakeoverChannel, err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for a takeover: %w", err)
		}
		var t struct {
			ClientID string `json:"clientId"`
			Token    string `json:"token"`
		}
		if err := json.Unmarshal([]byte(n.Payload), &t); err != nil {
			log.Warn("a session takeover notice chatd did not write", "payload", n.Payload, "err", err)
			continue
		}
		taken(t.ClientID, t.Token)
	}
}
