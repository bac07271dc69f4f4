package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// Attachments keeps uploads, attachments and the blob deletion queue
// (migration 0012) for the attachment subsystem: chat.AttachmentStore.
// Sends attach uploads inside chat_send_batch (functions.sql), not here.
//
// Lock order: sends lock conversation rows, then attachment rows (in id
// order). Everything here locks only attachment or blob_deletion rows, one
// statement at a time, so nothing here deadlocks a send: an upload being
// attached is skipped by the expiry (SKIP LOCKED) and seen attached on
// its next round.
//
// Attachments is safe for concurrent use.
type Attachments struct {
	pool *pgxpool.Pool
}

var _ chat.AttachmentStore = (*Attachments)(nil)

// NewAttachments returns the attachment store on pool.
func NewAttachments(pool *pgxpool.Pool) *Attachments { return &Attachments{pool: pool} }

const attachmentColumns = `id, blob_key, uploader_id, purpose, COALESCE(conversation_id, 0), name, declared_type, declared_size,
	COALESCE(duration_ms, 0), state, created_at, url_expires_at, completed_at, COALESCE(seq, 0), COALESCE(caption, ''),
	COALESCE(content_type, ''), COALESCE(size, 0), COALESCE(sha256, ''), COALESCE(width, 0), COALESCE(height, 0),
	COALESCE(thumb_state, ''), thumb_width, thumb_height, thumb_size`

func scanUpload(row pgx.Row, extra ...any) (chat.UploadRecord, error) {
	var (
		r          chat.UploadRecord
		state      string
		tw, th     *int32
		tsz        *int64
		width, hgt int32
	)
	dest := []any{&r.ID, &r.BlobKey, &r.UploaderID, &r.Purpose, &r.ConversationID, &r.Name, &r.DeclaredType, &r.DeclaredSize,
		&r.DurationMs, &state, &r.CreatedAt, &r.URLExpiresAt, &r.CompletedAt, &r.Seq, &r.Caption,
		&r.ContentType, &r.Size, &r.SHA256, &width, &hgt, &r.ThumbState, &tw, &th, &tsz}
	err := row.Scan(append(dest, extra...)...)
	if err != nil {
		return r, err
	}
	r.State, r.Width, r.Height = chat.UploadState(state), int(width), int(hgt)
	if tw != nil && th != nil && tsz != nil {
		r.Thumbnail = &chat.Thumbnail{ContentType: "image/jpeg", Width: int(*tw), Height: int(*th), Size: *tsz}
	}
	return r, nil
}

// CreateUpload records a pending upload: a message's for a member (not
// the blocked member of a direct conversation), an avatar's for anyone,
// charging the uploader's bytes of the UTC day against quotaBytes (> 0).
func (a *Attachments) CreateUpload(ctx context.Context, r chat.UploadRecord, quotaBytes int64) error {
	_, _, err := a.CreateKeyedUpload(ctx, r, "", quotaBytes)
	return err
}

// CreateKeyedUpload is CreateUpload claiming the uploader's key (none
// when key is ""): an upload the key made before is returned as it is
// (created false), once the uploader may still upload into r's
// conversation (uploadAccess), before anything is charged. Of two racing
// with one key (claimKey), the second waits on the first's key row or
// day's quota row, drops its own upload and charge, and returns the
// first's upload (not 429 when the quota holds the file only once).
func (a *Attachments) CreateKeyedUpload(ctx context.Context, r chat.UploadRecord, key string, quotaBytes int64) (chat.UploadRecord, bool, error) {
	if key != "" {
		k, err := chat.ValidateClientMsgID(key)
		if err != nil {
			return chat.UploadRecord{}, false, err
		}
		key = k
	}
	if quotaBytes > 0 && r.DeclaredSize > quotaBytes {
		// No day's quota could hold it: waiting until midnight would
		// not help, so it is no rate limit and says no Retry-After.
		return chat.UploadRecord{}, false, chat.Errorf(chat.CodeTooLarge,
			"the file is %d bytes, more than the %d bytes one user may upload in a day", r.DeclaredSize, quotaBytes)
	}
	if r.Purpose == "" {
		r.Purpose = chat.PurposeMessage
	}
	var (
		rec     chat.UploadRecord
		created bool
	)
	err := runTxOn(ctx, a.pool, "create upload", pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		created = false
		now, err := uploadAccess(ctx, tx, r)
		if err != nil {
			return err
		}
		if key != "" {
			found, err := keyedUpload(ctx, tx, r.UploaderID, key, &rec)
			if err != nil || found {
				return err
			}
		}
		if key == "" {
			if err := recordUpload(ctx, tx, r, quotaBytes, now); err != nil {
				return err
			}
			rec, created = r, true
			return nil
		}
		// What the request answers when the key names no upload after
		// all: the quota's refusal if the charge was refused, else the
		// key's upload deleted meanwhile.
		refusal := fmt.Errorf("the upload of key %s vanished", key)
		won, err := claimKey(ctx, tx, func(sp pgx.Tx) (bool, error) {
			if err := recordUpload(ctx, sp, r, quotaBytes, now); err != nil {
				if chat.ErrorCode(err) == chat.CodeRateLimited {
					// The day's row was the first's to charge: it may
					// hold the file once, not twice.
					refusal = err
					return false, nil
				}
				return false, err
			}
			tag, err := sp.Exec(ctx, `INSERT INTO upload_create (uploader_id, create_key, upload_id) VALUES ($1, $2, $3)
				ON CONFLICT (uploader_id, create_key) DO NOTHING`, r.UploaderID, key, r.ID)
			if err != nil {
				return false, fmt.Errorf("claim upload key %s: %w", key, err)
			}
			return tag.RowsAffected() == 1, nil
		}, func(tx pgx.Tx) error {
			found, err := keyedUpload(ctx, tx, r.UploaderID, key, &rec)
			if err == nil && !found {
				err = refusal
			}
			return err
		})
		if err != nil || !won {
			return err
		}
		rec, created = r, true
		return nil
	})
	if err != nil {
		return chat.UploadRecord{}, false, err
	}
	return rec, created, nil
}

// uploadAccess refuses an upload into r's conversation to a user who may
// not write there (not_found, not_member, blocked; an avatar's is anyone's)
// and returns the database's now. A ticket asked again with its key is
// refused the same: it is leave to write into the conversation, and what
// it carries could never be sent.
func uploadAccess(ctx context.Context, q rowQuerier, r chat.UploadRecord) (time.Time, error) {
	var exists, member, blocked bool
	var now time.Time
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conversation WHERE id = $1),
		EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = $1 AND user_id = $2),
		EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = $1 AND user_id = $2 AND peer_blocked), now()`,
		r.ConversationID, r.UploaderID).Scan(&exists, &member, &blocked, &now); err != nil {
		return now, fmt.Errorf("check membership: %w", err)
	}
	switch {
	case r.Purpose == chat.PurposeAvatar:
	case !exists:
		return now, errNoConversation(r.ConversationID)
	case !member:
		return now, errNotMember(r.ConversationID)
	case blocked:
		// What it carries could never be sent (as for typing).
		return now, chat.Errorf(chat.CodeBlocked, "the other member of conversation %d does not accept your messages", r.ConversationID)
	}
	return now, nil
}

// recordUpload charges r's declared bytes against the day's quota (>
// 0) and inserts r, pending.
func recordUpload(ctx context.Context, tx pgx.Tx, r chat.UploadRecord, quotaBytes int64, now time.Time) error {
	if quotaBytes > 0 {
		// One row per user and day, updated in place: the check and
		// the charge are one statement, so concurrent uploads of
		// one user cannot both slip under the quota.
		var used int64
		err := tx.QueryRow(ctx, `
			INSERT INTO upload_quota (user_id, day, bytes, uploads)
			VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2, 1)
			ON CONFLICT (user_id, day) DO UPDATE
			   SET bytes = upload_quota.bytes + EXCLUDED.bytes, uploads = upload_quota.uploads + 1
			 WHERE upload_quota.bytes + EXCLUDED.bytes <= $3
			RETURNING bytes`, r.UploaderID, r.DeclaredSize, quotaBytes).Scan(&used)
		if errors.Is(err, pgx.ErrNoRows) {
			return quotaError(quotaBytes, now)
		}
		if err != nil {
			return fmt.Errorf("charge the upload quota: %w", err)
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO attachment (id, blob_key, uploader_id, purpose, conversation_id, name, declared_type,
		declared_size, duration_ms, url_expires_at) VALUES ($1, $2, $3, $4, NULLIF($5::bigint, 0), $6, $7, $8, NULLIF($9::bigint, 0), $10)`,
		r.ID, r.BlobKey, r.UploaderID, r.Purpose, r.ConversationID, r.Name, r.DeclaredType, r.DeclaredSize, r.DurationMs, r.URLExpiresAt)
	if err != nil {
		return fmt.Errorf("record upload: %w", err)
	}
	return nil
}

// UploadByKey reads the upload asked.UploaderID made with key, once they
// may still upload into asked's conversation (uploadAccess).
func (a *Attachments) UploadByKey(ctx context.Context, asked chat.UploadRecord, key string) (chat.UploadRecord, bool, error) {
	k, err := chat.ValidateClientMsgID(key)
	if err != nil {
		return chat.UploadRecord{}, false, err
	}
	if asked.Purpose == "" {
		asked.Purpose = chat.PurposeMessage
	}
	if err := a.UploadAccess(ctx, asked); err != nil {
		return chat.UploadRecord{}, false, err
	}
	var rec chat.UploadRecord
	found, err := keyedUpload(ctx, a.pool, asked.UploaderID, k, &rec)
	return rec, found, classify("read upload by key", err)
}

// UploadAccess refuses r's uploader who may not upload into r's
// conversation (uploadAccess).
func (a *Attachments) UploadAccess(ctx context.Context, r chat.UploadRecord) error {
	_, err := uploadAccess(ctx, a.pool, r)
	return classify("check upload access", err)
}

// rowQuerier is a transaction or the pool.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// keyedUpload reads into rec the upload uploaderID made with key.
func keyedUpload(ctx context.Context, q rowQuerier, uploaderID int64, key string, rec *chat.UploadRecord) (bool, error) {
	r, err := scanUpload(q.QueryRow(ctx, `SELECT `+attachmentColumns+` FROM attachment
		WHERE id = (SELECT upload_id FROM upload_create WHERE uploader_id = $1 AND create_key = $2)`, uploaderID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the upload of key %s: %w", key, err)
	}
	*rec = r
	return true, nil
}

// quotaError refuses an upload over the day's bytes until midnight UTC.
func quotaError(quota int64, now time.Time) error {
	now = now.UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	retry := midnight.Sub(now)
	return &chat.Error{Code: chat.CodeRateLimited,
		Message:   fmt.Sprintf("upload quota reached: at most %s per day (UTC); retry in %s", chat.SizeText(quota), retry.Round(time.Minute)),
		RateLimit: &chat.RateLimitInfo{Kind: "upload_bytes", Limit: int(min(quota, 1<<31-1)), RetryAfter: retry, Reset: retry}}
}

// GetUpload reads one upload (not_found).
func (a *Attachments) GetUpload(ctx context.Context, id string) (chat.UploadRecord, error) {
	r, err := scanUpload(a.pool.QueryRow(ctx, `SELECT `+attachmentColumns+` FROM attachment WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, chat.Errorf(chat.CodeNotFound, "there is no upload %s", id)
	}
	if err != nil {
		return r, classify("read upload", err)
	}
	return r, nil
}

// CompleteUpload records what chatd read from an upload's bytes. When
// they were copied to a key of chatd's own (m.BlobKey), the upload's key
// is queued for deletion not before m.KeyDeletableAt, nor its URL's
// expiry (a PUT may still write it until then), and the copy's deletion, queued before it was
// written, is taken back, in the same statement: nothing is orphaned.
func (a *Attachments) CompleteUpload(ctx context.Context, id string, m chat.UploadMeta) (bool, error) {
	var thumb *string
	if m.Thumbnail {
		p := "pending"
		thumb = &p
	}
	var n int
	err := a.pool.QueryRow(ctx, `
		WITH prev AS (
			SELECT blob_key, url_expires_at FROM attachment WHERE id = $1 AND state = 'pending'
		), done AS (
			UPDATE attachment t SET state = 'complete', completed_at = now(), content_type = $2, size = $3,
				sha256 = $4, width = NULLIF($5, 0), height = NULLIF($6, 0), duration_ms = COALESCE(NULLIF($7::bigint, 0), t.duration_ms),
				thumb_state = $8, blob_key = COALESCE(NULLIF($9, ''), t.blob_key)
			WHERE t.id = $1 AND t.state = 'pending' RETURNING t.id
		), moved AS (
			INSERT INTO blob_deletion (blob_key, reason, not_before)
			SELECT p.blob_key, 'upload URL', GREATEST(p.url_expires_at, $10::timestamptz) FROM prev p, done
			WHERE p.blob_key <> COALESCE(NULLIF($9, ''), p.blob_key)
			`+requeueSQL+`
		), copied AS (
			DELETE FROM blob_deletion d USING prev p, done
			WHERE d.blob_key = NULLIF($9, '') AND d.blob_key <> p.blob_key
		)
		SELECT count(*) FROM done`, id, m.ContentType, m.Size, m.SHA256, m.Width, m.Height, m.DurationMs, thumb, m.BlobKey, m.KeyDeletableAt).Scan(&n)
	if err != nil {
		return false, classify("complete upload", err)
	}
	return n == 1, nil
}

// DropUpload deletes an upload never used and queues its blob.
func (a *Attachments) DropUpload(ctx context.Context, id string, notBefore time.Time) error {
	_, err := a.pool.Exec(ctx, `
		WITH gone AS (DELETE FROM attachment WHERE id = $1 AND state IN ('pending', 'complete') RETURNING blob_key)
		INSERT INTO blob_deletion (blob_key, reason, not_before)
		SELECT blob_key, 'refused', $2 FROM gone
		`+requeueSQL, id, notBefore)
	return classify("drop upload", err)
}

// QueueBlobDeletion queues one blob's deletion.
func (a *Attachments) QueueBlobDeletion(ctx context.Context, key, reason string, notBefore time.Time) error {
	_, err := a.pool.Exec(ctx, `INSERT INTO blob_deletion (blob_key, reason, not_before) VALUES ($1, $2, $3)
		`+requeueSQL, key, reason, notBefore)
	return classify("queue blob deletion", err)
}

// SetThumbnail records a thumbnail: for the attachment, and for every
// live row still waiting for one that names the same blob (a forward's
// copies share the original's bytes and so its thumbnail, and one made
// before the thumbnail copied "pending"). When the attachment is not live
// any more (recalled, or expired and deleted), its blob is queued again,
// so the thumbnail just written is deleted with it (requeueSQL: also when
// a deletion round is deleting that blob right now); when it is, the
// deletion queued while the thumbnail was made is taken back (a live row
// names the blob: the deletion would be forgotten anyway).
func (a *Attachments) SetThumbnail(ctx context.Context, id, blobKey string, t *chat.Thumbnail) (bool, error) {
	state, w, h, size := "failed", 0, 0, int64(0)
	if t != nil {
		state, w, h, size = "ready", t.Width, t.Height, t.Size
	}
	var live bool
	err := a.pool.QueryRow(ctx, `
		WITH set AS (
			UPDATE attachment SET thumb_state = $2, thumb_width = NULLIF($3, 0), thumb_height = NULLIF($4, 0), thumb_size = NULLIF($5, 0)
			WHERE blob_key = $6 AND (id = $1 OR thumb_state = 'pending') AND state IN ('complete', 'attached', 'avatar') RETURNING id
		), requeue AS (
			INSERT INTO blob_deletion (blob_key, reason)
			SELECT $6, 'thumbnail of a deleted attachment' WHERE NOT EXISTS (SELECT 1 FROM set)
			`+requeueSQL+`
		), held AS (
			DELETE FROM blob_deletion WHERE blob_key = $6 AND EXISTS (SELECT 1 FROM set)
		)
		SELECT EXISTS (SELECT 1 FROM set)`, id, state, w, h, size, blobKey).Scan(&live)
	if err != nil {
		return false, classify("record thumbnail", err)
	}
	return live, nil
}

// requeueSQL ends every INSERT into blob_deletion (the later not_before
// wins: a presigned PUT URL may still write the blob until it expires).
// DO NOTHING would not do: a deletion round
// (DeleteBlobs) holding the blob's row locked, deleting the blob or
// forgetting the row because a live row still named it a moment ago, is
// passed over, and its commit then forgets the blob this insert was to
// queue (a thumbnail written after the round deleted the blob's files,
// the last live copy recalled after the round looked). DO UPDATE waits
// for that round, and inserts again once its commit deleted the row.
const requeueSQL = `ON CONFLICT (blob_key) DO UPDATE SET not_before = GREATEST(blob_deletion.not_before, EXCLUDED.not_before)`

// PendingThumbnails lists images whose thumbnail is still to be made.
func (a *Attachments) PendingThumbnails(ctx context.Context, limit int) ([]chat.UploadRecord, error) {
	rows, err := a.pool.Query(ctx, `SELECT `+attachmentColumns+` FROM attachment
		WHERE thumb_state = 'pending' AND state IN ('complete', 'attached', 'avatar') ORDER BY completed_at LIMIT $1`, limit)
	if err != nil {
		return nil, classify("read pending thumbnails", err)
	}
	defer rows.Close()
	var out []chat.UploadRecord
	for rows.Next() {
		r, err := scanUpload(rows)
		if err != nil {
			return nil, classify("read pending thumbnails", err)
		}
		out = append(out, r)
	}
	return out, classify("read pending thumbnails", rows.Err())
}

// Attachment returns what userID may fetch: its own upload (pending or
// complete), an attachment of a conversation userID is in, of a message
// after their history floor, or an avatar: a user's to whoever sees their
// profile (seesProfileSQL) but the users they blocked (blockedBySQL), a
// group's to its current members (whatever
// their floor: an avatar is the group's, not a message). Another user's
// upload not used yet, a file of a message at or before the caller's
// floor (a group whose history is "joined", a message from before their
// join), and an avatar the caller may not see are not_found; a sent
// attachment of a conversation the caller is not in is not_member (its
// id was shown only to members: nobody learns anything by guessing 128
// random bits); a recalled file and a released avatar are gone.
func (a *Attachments) Attachment(ctx context.Context, id string, userID int64) (chat.UploadRecord, error) {
	var (
		floor *int64 // nil: not a member
		sees  bool   // an avatar userID may see
	)
	r, err := scanUpload(a.pool.QueryRow(ctx, `SELECT `+attachmentColumns+`,
		(SELECT `+floorSQL+` FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
		 WHERE m.conversation_id = a.conversation_id AND m.user_id = $2),
		CASE WHEN a.state NOT IN ('avatar', 'released') THEN false
		     WHEN a.conversation_id IS NOT NULL THEN EXISTS (SELECT 1 FROM conversation_member m
		         WHERE m.conversation_id = a.conversation_id AND m.user_id = $2)
		     ELSE `+seesProfileSQL("$2", "a.uploader_id")+` AND NOT `+blockedBySQL("$2", "a.uploader_id")+` END
		FROM attachment a WHERE id = $1`, id, userID), &floor, &sees)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, chat.Errorf(chat.CodeNotFound, "there is no attachment %s", id)
	}
	if err != nil {
		return r, classify("read attachment", err)
	}
	switch r.State {
	case chat.UploadAttached, chat.UploadRecalled:
		if floor == nil {
			return r, errNotMember(r.ConversationID)
		}
		if r.Seq <= *floor {
			// As its message: nothing before the floor exists for them.
			return r, chat.Errorf(chat.CodeNotFound, "there is no attachment %s", id)
		}
		if r.State == chat.UploadRecalled {
			return r, chat.Errorf(chat.CodeGone, "attachment %s was recalled with its message", id)
		}
	case chat.UploadAvatar, chat.UploadReleased:
		if !sees {
			return r, chat.Errorf(chat.CodeNotFound, "there is no attachment %s", id)
		}
		if r.State == chat.UploadReleased {
			return r, chat.Errorf(chat.CodeGone, "avatar %s was replaced; its bytes are gone", id)
		}
	default: // not used yet: its uploader's alone
		if r.UploaderID != userID {
			return r, chat.Errorf(chat.CodeNotFound, "there is no attachment %s", id)
		}
	}
	return r, nil
}

// ExpireUploads drops uploads never used (attached, or an avatar),
// created before cutoff, queueing their blobs for urlGrace after their
// URL expired. A row a send or a profile write holds locked (it is being
// used) is skipped.
func (a *Attachments) ExpireUploads(ctx context.Context, cutoff time.Time, urlGrace time.Duration, limit int) (int, error) {
	tag, err := a.pool.Exec(ctx, `
		WITH old AS (
			SELECT id FROM attachment WHERE state IN ('pending', 'complete') AND created_at < $1
			ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED
		), gone AS (
			DELETE FROM attachment t USING old WHERE t.id = old.id AND t.state IN ('pending', 'complete')
			RETURNING t.blob_key, t.url_expires_at
		)
		INSERT INTO blob_deletion (blob_key, reason, not_before)
		SELECT DISTINCT ON (blob_key) blob_key, 'expired', url_expires_at + $2 * interval '1 microsecond' FROM gone
		`+requeueSQL, cutoff, urlGrace.Microseconds(), limit)
	if err != nil {
		return 0, classify("expire uploads", err)
	}
	return int(tag.RowsAffected()), nil
}

// ForgetPastQuotas deletes the upload_quota rows of the days before
// yesterday (UTC). A charge touches only its own day's row, so these are
// locked by nobody; yesterday's is kept for a charge whose transaction
// began before midnight and commits after it.
func (a *Attachments) ForgetPastQuotas(ctx context.Context) (int64, error) {
	tag, err := a.pool.Exec(ctx, `DELETE FROM upload_quota WHERE day < (now() AT TIME ZONE 'UTC')::date - 1`)
	if err != nil {
		return 0, classify("forget past upload quotas", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteBlobs runs due deletions in one transaction that holds their rows
// (SKIP LOCKED: nodes share the queue): del removes the blob, and only the
// rows of blobs del removed (or that a live attachment still names, which
// are kept) are deleted, at the commit. A crash before the
// commit forgets nothing; the deletion runs again, and deleting a missing
// blob succeeds.
func (a *Attachments) DeleteBlobs(ctx context.Context, limit int, del func(ctx context.Context, key string) error) (int, error) {
	done := 0
	err := runTxOn(ctx, a.pool, "delete blobs", pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// The transaction is idle while the blob store deletes (up to
		// limit blobs, each within its own timeout), longer than the
		// pool's idle_in_transaction_session_timeout allows; the rows it
		// holds are claims that other nodes skip: nothing waits on them.
		if _, err := tx.Exec(ctx, `SET LOCAL idle_in_transaction_session_timeout = 0`); err != nil {
			return fmt.Errorf("allow the deletions' wait: %w", err)
		}
		// A blob a live attachment still names (a forward's copy of a
		// recalled message's file) is kept: its queued deletion is
		// forgotten, and queued again when its last live row is recalled.
		rows, err := tx.Query(ctx, `SELECT d.blob_key, EXISTS (SELECT 1 FROM attachment a
				WHERE a.blob_key = d.blob_key AND a.state NOT IN ('recalled', 'released'))
			FROM blob_deletion d WHERE d.not_before <= now()
			ORDER BY d.not_before LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return fmt.Errorf("claim blob deletions: %w", err)
		}
		var keys, kept []string
		var key string
		var live bool
		if _, err := pgx.ForEachRow(rows, []any{&key, &live}, func() error {
			if live {
				kept = append(kept, key)
			} else {
				keys = append(keys, key)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("claim blob deletions: %w", err)
		}
		if len(kept) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM blob_deletion WHERE blob_key = ANY($1)`, kept); err != nil {
				return fmt.Errorf("keep blobs still attached: %w", err)
			}
		}
		var gone, failed []string
		var reasons []string
		for _, k := range keys {
			if err := del(ctx, k); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				failed, reasons = append(failed, k), append(reasons, err.Error())
				continue
			}
			gone = append(gone, k)
		}
		if len(gone) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM blob_deletion WHERE blob_key = ANY($1)`, gone); err != nil {
				return fmt.Errorf("forget deleted blobs: %w", err)
			}
		}
		if len(failed) > 0 {
			// Back off: a blob store that fails now is tried again in a
			// minute, then less and less often (at most hourly).
			if _, err := tx.Exec(ctx, `UPDATE blob_deletion d SET attempts = d.attempts + 1, last_error = f.reason,
				not_before = now() + least(interval '1 hour', interval '1 minute' * power(2, d.attempts))
				FROM unnest($1::text[], $2::text[]) AS f(key, reason) WHERE d.blob_key = f.key`, failed, reasons); err != nil {
				return fmt.Errorf("record failed blob deletions: %w", err)
			}
		}
		done = len(gone)
		return nil
	})
	return done, err
}

// PendingBlobDeletions counts the queued blob deletions (a metric).
func (a *Attachments) PendingBlobDeletions(ctx context.Context) (int64, error) {
	var n int64
	err := a.pool.QueryRow(ctx, `SELECT count(*) FROM blob_deletion`).Scan(&n)
	return n, classify("count blob deletions", err)
}
