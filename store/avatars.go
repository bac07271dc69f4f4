package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// Avatars from the attachment store (migration 0034). An avatar upload of
// a user's becomes their avatar or a group's (useAvatar) in the
// transaction that writes the profile or the group, and the avatar it
// replaces is released (releaseAvatar) in the same transaction: its row
// goes to 'released' and its blob to the deletion queue, so there is
// never an orphan blob nor an avatar whose bytes are gone.
//
// Lock order: the profile (an advisory lock per user) or the group's
// conversation row first, then attachment rows, as sends lock
// conversation rows before attachment rows.

// useAvatar makes upload id, which must be userID's complete avatar
// upload never used, the avatar of userID (conversationID 0) or of the
// group conversationID. The row is locked first: the upload expiry skips
// it, and of two uses of one upload the second sees the first's.
func useAvatar(ctx context.Context, tx pgx.Tx, id string, userID, conversationID int64) error {
	var (
		uploader       int64
		purpose, state string
		urlExpired     bool
	)
	err := tx.QueryRow(ctx, `SELECT uploader_id, purpose, state, url_expires_at < now() FROM attachment WHERE id = $1 FOR UPDATE`,
		id).Scan(&uploader, &purpose, &state, &urlExpired)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && uploader != userID) {
		return chat.Errorf(chat.CodeNotFound, "you have no upload %s (an upload never used is deleted after the upload TTL)", id)
	}
	if err != nil {
		return fmt.Errorf("read the avatar upload: %w", err)
	}
	if purpose != chat.PurposeAvatar {
		return chat.Errorf(chat.CodeInvalid, `upload %s is a message's; upload the picture with "purpose":"avatar"`, id)
	}
	switch chat.UploadState(state) {
	case chat.UploadComplete:
	case chat.UploadPending:
		if urlExpired {
			return chat.Errorf(chat.CodeGone, "upload %s expired before its bytes arrived; create a new upload", id)
		}
		return chat.Errorf(chat.CodeInvalid, "upload %s is not complete: PUT its bytes (and, with an object store, POST its completeUrl) first", id)
	case chat.UploadAvatar:
		return chat.Errorf(chat.CodeConflict, "upload %s is an avatar already; an avatar upload is used once", id)
	default: // released
		return chat.Errorf(chat.CodeGone, "upload %s was an avatar that was replaced; its bytes are gone", id)
	}
	if _, err := tx.Exec(ctx, `UPDATE attachment SET state = 'avatar', conversation_id = NULLIF($2::bigint, 0) WHERE id = $1`,
		id, conversationID); err != nil {
		return fmt.Errorf("use the avatar upload: %w", err)
	}
	return nil
}

// releaseAvatar releases the avatar upload id that was replaced or
// cleared (or whose group was archived: why): its row stays, released (a
// fetch answers 410), and its blob is queued for deletion a minute on, so
// a thumbnail being made lands first and goes with it (as for a recall).
func releaseAvatar(ctx context.Context, tx pgx.Tx, id, why string) error {
	if _, err := tx.Exec(ctx, `
		WITH released AS (
			UPDATE attachment SET state = 'released', name = '', sha256 = NULL
			WHERE id = $1 AND state = 'avatar' RETURNING blob_key
		)
		INSERT INTO blob_deletion (blob_key, reason, not_before)
		SELECT blob_key, $2, now() + interval '1 minute' FROM released
		`+requeueSQL, id, why); err != nil {
		return fmt.Errorf("release the avatar: %w", err)
	}
	return nil
}

// avatarChange is how a profile or group write changes the avatar, from
// its current upload (cur, nil: none or a URL).
type avatarChange struct {
	url      *string // the avatar column's new value ("": none); nil: unchanged
	uploadID *string // the avatar_upload_id written with url
}

// planAvatar decides an update's avatar (url, uploadID: the update's, at
// most one set) over the current upload cur, taking the new upload for
// userID (conversationID: a group's) unless it is cur already.
func planAvatar(ctx context.Context, tx pgx.Tx, url, uploadID, cur *string, userID, conversationID int64) (avatarChange, error) {
	switch {
	case uploadID != nil:
		path := chat.AvatarPath(*uploadID)
		if cur == nil || *cur != *uploadID {
			if err := useAvatar(ctx, tx, *uploadID, userID, conversationID); err != nil {
				return avatarChange{}, err
			}
		}
		return avatarChange{url: &path, uploadID: uploadID}, nil
	case url != nil:
		return avatarChange{url: url}, nil
	}
	return avatarChange{uploadID: cur}, nil
}

// release releases cur when the change replaced it.
func (c avatarChange) release(ctx context.Context, tx pgx.Tx, cur *string) error {
	if c.url == nil || cur == nil || (c.uploadID != nil && *c.uploadID == *cur) {
		return nil
	}
	return releaseAvatar(ctx, tx, *cur, "avatar replaced")
}
