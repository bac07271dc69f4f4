package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// claimKey is how a write claims a key that names one row for good (a
// pair's direct conversation, a creator's keyed group, an uploader's
// keyed upload), so that of concurrent writes with one key one makes the
// row and the others answer it.
//
// claim runs in a savepoint of tx: it writes the rows the key is to name
// and then claims the key with INSERT ... ON CONFLICT DO NOTHING on the
// key's unique index, reporting whether its row went in (won).
//
// What is locked when: a claim meeting the key inserted by a transaction
// still in progress waits for that transaction to end, holding the
// savepoint's rows meanwhile. If the other commits, DO NOTHING yields
// (no row, no error): this write lost. If it rolls back, the claim goes
// in and this write won; later writes then wait on it in turn. A claim
// that waits on another row the winner wrote first (the day's quota row
// an upload charges) and is refused once it commits reports won false
// too, before reaching the key.
//
// Why a savepoint: the loser has written rows of its own before its claim
// (a conversation, an upload and its charge). Rolling back to the
// savepoint discards exactly those, while tx, with the checks and locks
// taken before, goes on to answer the winner's row; DO NOTHING raises no
// error, so the savepoint is for that, not for recovering from one.
//
// What the loser sees: winner then reads, on tx, the row the key names.
// tx must be READ COMMITTED: winner's statement takes a fresh snapshot,
// which holds the commit the claim waited for (under REPEATABLE READ the
// claim would fail to serialize instead). winner answers that row, or an
// error: the key reused for another request (409 conflict), or no row
// after all (the claim was refused with no winner, or the key's row was
// deleted in between).
func claimKey(ctx context.Context, tx pgx.Tx, claim func(sp pgx.Tx) (won bool, err error), winner func(tx pgx.Tx) error) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("savepoint: %w", err)
	}
	defer func() { _ = sp.Rollback(ctx) }()
	won, err := claim(sp)
	if err != nil {
		return false, err
	}
	if !won {
		if err := sp.Rollback(ctx); err != nil {
			return false, fmt.Errorf("rollback to savepoint: %w", err)
		}
		return false, winner(tx)
	}
	if err := sp.Commit(ctx); err != nil {
		return false, fmt.Errorf("release savepoint: %w", err)
	}
	return true, nil
}
