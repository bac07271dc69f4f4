package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/retry"
)

// TakeoverChannel is the channel on which chat_session_open announces that
// a connection took a session over from a connection of another chatd
// process (migrations/functions.sql).
const TakeoverChannel = "chat_session_takeover"

// Notices are what other chatd processes announce that a node acts on.
// Each func runs on Watch's goroutine and must not block; a nil one is not
// listened for.
type Notices struct {
	// TakenOver: a connection of another process took clientID's session
	// over from the connection token; token's node closes that connection
	// (MQTT-3.1.4-3).
	TakenOver func(clientID, token string)
	// TokensRevoked: userID's tokens issued before before are refused
	// (RevokeTokens); every node closes the connections one authenticated.
	TokensRevoked func(userID int64, before time.Time)
}

// WatchTakeovers is Watch for takeovers alone.
func (s *Sessions) WatchTakeovers(ctx context.Context, taken func(clientID, token string), log *slog.Logger) error {
	return s.Watch(ctx, Notices{TakenOver: taken}, log)
}

// Watch calls n's funcs for every notice, for as long as ctx lives. It
// listens on a connection of its own and, when that fails, connects again
// with backoff. A takeover announced meanwhile is missed, and its old
// connection then stays open until its keepalive runs out, as any
// half-open connection does (its end leaves the session alone). A
// connection quiet for 30 s must answer within as long
// (pgembed.WaitForNotification), so one to a database host that vanished
// is replaced within a minute. Token
// revocations are not lost: each time it listens again it reads those set
// since it last listened (the first time: since a minute before Watch
// started, which covers connections accepted before it listened). It
// returns when ctx ends.
func (s *Sessions) Watch(ctx context.Context, n Notices, log *slog.Logger) error {
	since := time.Now().Add(-time.Minute)
	for attempt := 0; ; {
		err := s.watch(ctx, n, log, &since, func() { attempt = 0 })
		if ctx.Err() != nil {
			return nil
		}
		attempt++
		log.Warn("watching other nodes' notices failed; listening again", "attempt", attempt, "err", err)
		if !retry.Sleep(ctx, retry.Backoff(attempt, 100*time.Millisecond, 10*time.Second)) {
			return nil
		}
	}
}

func (s *Sessions) watch(ctx context.Context, n Notices, log *slog.Logger, since *time.Time, listening func()) error {
	check := cmp.Or(s.watchCheck, pgembed.Quiet)
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "chatd-takeovers"
	pgembed.Listening(cfg)
	pgembed.EndIfClientVanishes(cfg) // the server's end of a node that vanished
	setupCtx, cancel := context.WithTimeout(ctx, check)
	defer cancel()
	conn, err := pgx.ConnectConfig(setupCtx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if n.TakenOver != nil {
		if _, err := conn.Exec(setupCtx, "LISTEN "+TakeoverChannel); err != nil {
			return fmt.Errorf("listen %s: %w", TakeoverChannel, err)
		}
	}
	if n.TokensRevoked != nil {
		if _, err := conn.Exec(setupCtx, "LISTEN "+TokensRevokedChannel); err != nil {
			return fmt.Errorf("listen %s: %w", TokensRevokedChannel, err)
		}
		// Listening from now on; what was set before it may have been
		// missed. The database's clock, as revoked_at is.
		var now time.Time
		if err := conn.QueryRow(setupCtx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return fmt.Errorf("read the time: %w", err)
		}
		missed, err := tokensRevokedSince(setupCtx, conn, *since)
		if err != nil {
			return fmt.Errorf("read token revocations: %w", err)
		}
		for _, r := range missed {
			n.TokensRevoked(r.userID, r.before)
		}
		*since = now
	}
	cancel()
	listening()
	for {
		note, err := pgembed.WaitForNotification(ctx, conn, check)
		if err != nil {
			return fmt.Errorf("wait for a notice: %w", err)
		}
		switch note.Channel {
		case TakeoverChannel:
			var t struct {
				ClientID string `json:"clientId"`
				Token    string `json:"token"`
			}
			if err := json.Unmarshal([]byte(note.Payload), &t); err != nil {
				log.Warn("a session takeover notice chatd did not write", "payload", note.Payload, "err", err)
				continue
			}
			n.TakenOver(t.ClientID, t.Token)
		case TokensRevokedChannel:
			var t struct {
				UserID int64 `json:"userId"`
				Before int64 `json:"before"`
			}
			if err := json.Unmarshal([]byte(note.Payload), &t); err != nil || t.UserID <= 0 {
				log.Warn("a token revocation notice chatd did not write", "payload", note.Payload, "err", err)
				continue
			}
			n.TokensRevoked(t.UserID, time.Unix(t.Before, 0))
		}
	}
}
