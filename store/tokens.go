package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// TokensRevokedChannel is the channel on which RevokeTokens announces a
// revocation to every node ({"userId":N,"before":unix seconds}): each
// closes the connections authenticated by a token of that user issued
// before it (Sessions.Watch).
const TokensRevokedChannel = "chat_tokens_revoked"

// RevokeTokens implements chat.TokenStore. The instant is the next whole
// second of the database's clock, never earlier than one set before. The
// user's push devices go with their tokens: each was registered by a
// session now signed out, and a stolen phone must not keep showing the
// user's messages on its lock screen (apps register again when signed in).
// The DELETE runs under the user's device lock (chat_lock_user_devices),
// in a statement of its own after the lock is granted: a registration in
// progress commits first and its device is deleted too, and one that
// comes after reads the revocation and refuses a token it revokes.
func (s *Store) RevokeTokens(ctx context.Context, userID int64) (time.Time, error) {
	var before time.Time
	err := s.inTx(ctx, "revoke tokens", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT chat_lock_user_devices($1)`, userID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
WITH d AS (
    DELETE FROM push_device WHERE user_id = $1
), r AS (
    INSERT INTO token_revocation AS t (user_id, revoked_before, revoked_at)
    VALUES ($1, date_trunc('second', clock_timestamp()) + interval '1 second', clock_timestamp())
    ON CONFLICT (user_id) DO UPDATE
        SET revoked_before = GREATEST(t.revoked_before, EXCLUDED.revoked_before), revoked_at = EXCLUDED.revoked_at
    RETURNING revoked_before
)
SELECT revoked_before, pg_notify('`+TokensRevokedChannel+`',
    json_build_object('userId', $1::bigint, 'before', extract(epoch FROM revoked_before)::bigint)::text) IS NULL
FROM r`, userID).Scan(&before, new(bool))
	})
	if err != nil {
		return time.Time{}, err
	}
	return before, nil
}

// TokensRevokedBefore implements chat.TokenStore.
func (s *Store) TokensRevokedBefore(ctx context.Context, userID int64) (time.Time, error) {
	var before time.Time
	err := s.pool.QueryRow(ctx, `SELECT revoked_before FROM token_revocation WHERE user_id = $1`, userID).Scan(&before)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, classify("read token revocation", err)
	}
	return before, nil
}

// tokenRevocation is one row of token_revocation.
type tokenRevocation struct {
	userID int64
	before time.Time
}

// tokensRevokedSince reads the revocations set at or after since, for a
// listener that may have missed their announcements.
func tokensRevokedSince(ctx context.Context, conn *pgx.Conn, since time.Time) ([]tokenRevocation, error) {
	rows, err := conn.Query(ctx, `SELECT user_id, revoked_before FROM token_revocation WHERE revoked_at >= $1`, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (tokenRevocation, error) {
		var t tokenRevocation
		err := r.Scan(&t.userID, &t.before)
		return t, err
	})
}

var _ chat.TokenStore = (*Store)(nil)
