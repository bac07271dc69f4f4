package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// Profiles, privacy settings and blocks. A user without a user_profile row
// has an empty profile; without a user_settings row both settings are on.

// seesProfileSQL is the rule of who sees a user's profile (and avatar) in
// SQL: the viewer is the subject or shares a conversation with them (of
// a subject who blocked the viewer, only the name: blockedBySQL). Every
// query that needs it says it this way.
func seesProfileSQL(viewer, subject string) string {
	return `(` + subject + ` = ` + viewer + ` OR EXISTS (
	SELECT 1 FROM conversation_member vm JOIN conversation_member sm ON sm.conversation_id = vm.conversation_id
	WHERE vm.user_id = ` + viewer + ` AND sm.user_id = ` + subject + `))`
}

// blockedBySQL says that subject blocked viewer, who then sees of
// subject's profile only what chat.Profile.SeenByBlocked keeps (the
// avatar's download included), in its profile.updated too
// (profileAudience). Every query that needs it says it this way.
func blockedBySQL(viewer, subject string) string {
	return `EXISTS (SELECT 1 FROM user_block b WHERE b.blocker_id = ` + subject + ` AND b.blocked_id = ` + viewer + `)`
}

// smallSharersSQL selects, for the memberships shm (conversation_member
// rows) that where picks, every member of shm's conversation when it has
// at most max members: (subject, shm.user_id; sharer; conversation_id),
// each subject paired with themself too. Who sees a user's presence, and
// gets their whole profile.updated, shares such a conversation with them:
// every statement that needs it says it this way (but presenceStartedSQL
// and presenceEndedSQL, which ask it about one conversation's members
// only, at a cost of their own: the same rule). where may name the
// outer statement's rows, not under the aliases shm, shc and sho.
func smallSharersSQL(where, max string) string {
	return `SELECT shm.user_id AS subject, sho.user_id AS sharer, shm.conversation_id
	FROM conversation_member shm
	JOIN conversation shc ON shc.id = shm.conversation_id AND shc.member_count <= ` + max + `
	JOIN conversation_member sho ON sho.conversation_id = shm.conversation_id
	WHERE ` + where
}

// sharesSmallSQL says that users a and b are both members of a
// conversation of at most max members: the rule of smallSharersSQL for
// one pair, which a statement that asks about a few given pairs says
// this way (not the sharers of each, a conversation's size of rows per
// conversation of theirs): a lookup of a's memberships (index
// conversation_member_user_idx), each probing b's member row (the
// primary key), that stops at the first conversation found. A pair that
// shares nothing reads all of a's memberships (and, as planned once the
// statistics take a user for a few memberships, compares each with each
// of b's): not for the pairs of a whole group (presenceStartedSQL), nor
// for a removal's (Presence.Watching reads those from its user's side).
func sharesSmallSQL(a, b, max string) string {
	return `EXISTS (SELECT 1 FROM conversation_member pa
	JOIN conversation_member pb ON pb.conversation_id = pa.conversation_id AND pb.user_id = ` + b + `
	JOIN conversation pc ON pc.id = pa.conversation_id AND pc.member_count <= ` + max + `
	WHERE pa.user_id = ` + a + `)`
}

// profilesSQL returns the profiles of $2 that $1 may see (seesProfileSQL),
// in $2's order, each with whether its user blocked $1. A user the viewer
// may not see is left out exactly like one that does not exist.
var profilesSQL = `
SELECT u.id, p.display_name, p.avatar_url, p.about, p.updated_at, ` + blockedBySQL("$1", "u.id") + `
FROM unnest($2::bigint[]) WITH ORDINALITY AS u(id, ord)
LEFT JOIN user_profile p ON p.user_id = u.id
WHERE ` + seesProfileSQL("$1", "u.id") + `
ORDER BY u.ord`

// Profiles returns the profiles of ids viewerID may see, in ids' order;
// those of users who blocked viewerID as chat.Profile.SeenByBlocked.
func (s *Store) Profiles(ctx context.Context, viewerID int64, ids []int64) ([]chat.Profile, error) {
	out, err := profiles(ctx, s.pool, viewerID, ids)
	if err != nil {
		return nil, classify("read profiles", err)
	}
	if out == nil {
		out = []chat.Profile{}
	}
	return out, nil
}

// profiles runs profilesSQL on q (the pool, or a transaction).
func profiles(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, viewerID int64, ids []int64) ([]chat.Profile, error) {
	rows, err := q.Query(ctx, profilesSQL, viewerID, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (chat.Profile, error) {
		var blockedBy bool
		p, err := scanProfileAnd(row, &blockedBy)
		if blockedBy {
			p = p.SeenByBlocked()
		}
		return p, err
	})
}

func scanProfile(row pgx.CollectableRow) (chat.Profile, error) { return scanProfileAnd(row) }

// scanProfileAnd scans a profile's columns and then more.
func scanProfileAnd(row pgx.CollectableRow, more ...any) (chat.Profile, error) {
	var (
		p     chat.Profile
		name  *string
		about *string
	)
	if err := row.Scan(append([]any{&p.ID, &name, &p.Avatar, &about, &p.UpdatedAt}, more...)...); err != nil {
		return p, err
	}
	if name != nil {
		p.DisplayName = *name
	}
	if about != nil {
		p.About = *about
	}
	if p.UpdatedAt != nil {
		at := p.UpdatedAt.UTC()
		p.UpdatedAt = &at
	}
	return p, nil
}

// setProfileSQL writes a profile when it changes; $3/$5 say whether the
// avatar and about are given ($4 with its avatar upload $7, $6), else the
// stored ones stay. updated_at is the time of the write, under the
// profile's lock, and after the one it replaces: profile.updated is kept
// by its latest updatedAt (docs/events.md), so the profile written last
// must have it. The transaction's start (now()) would not do: a write that
// began first may get the lock second.
const setProfileSQL = `
INSERT INTO user_profile AS p (user_id, display_name, avatar_url, avatar_upload_id, about, updated_at)
VALUES ($1, $2, CASE WHEN $3 THEN NULLIF($4, '') END, CASE WHEN $3 THEN $7::text END, CASE WHEN $5 THEN $6 ELSE '' END, clock_timestamp())
ON CONFLICT (user_id) DO UPDATE SET
	display_name = EXCLUDED.display_name,
	avatar_url = CASE WHEN $3 THEN NULLIF($4, '') ELSE p.avatar_url END,
	avatar_upload_id = CASE WHEN $3 THEN $7::text ELSE p.avatar_upload_id END,
	about = CASE WHEN $5 THEN $6 ELSE p.about END,
	updated_at = GREATEST(clock_timestamp(), p.updated_at + interval '1 microsecond')
WHERE (p.display_name, p.avatar_url, p.about) IS DISTINCT FROM
      (EXCLUDED.display_name, CASE WHEN $3 THEN NULLIF($4, '') ELSE p.avatar_url END, CASE WHEN $5 THEN $6 ELSE p.about END)
RETURNING user_id, display_name, avatar_url, about, updated_at`

// SetProfile stores userID's profile. When it changed, announceProfile
// tells it: profile.updated to this node's sessions of its audience
// (chat.ProfileAudience: the users who share a conversation of at most
// largeGroup members with them) and its outbox row to other nodes (which
// read the same audience: ProfileAudience). An avatar upload given
// becomes the avatar, and the one it replaces is released, in the same
// transaction (store/avatars.go).
func (s *Store) SetProfile(ctx context.Context, userID int64, u chat.ProfileUpdate, largeGroup int) (chat.Profile, error) {
	var p chat.Profile
	about := ""
	if u.About != nil {
		about = *u.About
	}
	err := s.orderedTx(ctx, "set profile", func(tx pgx.Tx, t **turn) ([]chat.Event, error) {
		// One profile write of a user at a time, so the avatar upload it
		// replaces is the one it read, even before the user's first row.
		// The read is a statement of its own, after the lock: one
		// statement reads what was committed when it began.
		if err := s.lockProfile(ctx, tx, userID, t); err != nil {
			return nil, err
		}
		var cur *string
		err := tx.QueryRow(ctx, `SELECT avatar_upload_id FROM user_profile WHERE user_id = $1`, userID).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("read the avatar: %w", err)
		}
		av, err := planAvatar(ctx, tx, u.AvatarURL, u.AvatarUploadID, cur, userID, 0)
		if err != nil {
			return nil, err
		}
		rows, err := tx.Query(ctx, setProfileSQL, userID, u.DisplayName, av.url != nil, strOrEmpty(av.url), u.About != nil, about, av.uploadID)
		if err != nil {
			return nil, fmt.Errorf("write profile: %w", err)
		}
		ps, err := pgx.CollectRows(rows, scanProfile)
		if err != nil {
			return nil, fmt.Errorf("write profile: %w", err)
		}
		if len(ps) == 0 {
			// Unchanged: answer what is stored, tell nobody.
			if ps, err = readProfile(ctx, tx, userID); err != nil || len(ps) != 1 {
				return nil, fmt.Errorf("read profile: %w (%d rows)", err, len(ps))
			}
			p = ps[0]
			return nil, nil
		}
		p = ps[0]
		if err := av.release(ctx, tx, cur); err != nil {
			return nil, err
		}
		aud, err := profileAudience(ctx, tx, userID, largeGroup)
		if err != nil {
			return nil, err
		}
		return announceProfile(ctx, tx, p, aud)
	})
	if err != nil {
		return chat.Profile{}, err
	}
	return p, nil
}

// lockProfile serialises the writers of userID's profile.updated, for the
// rest of the transaction: a profile write, and a block or unblock by
// userID that tells the profile again (setBlock). Under it the write
// takes its turn (*t, of orderedTx) to publish what it commits: so this
// node publishes one user's profile.updated in the order their writes
// committed (publishOrder).
func (s *Store) lockProfile(ctx context.Context, tx pgx.Tx, userID int64, t **turn) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('chat.profile:' || $1::bigint, 0))`, userID); err != nil {
		return fmt.Errorf("lock the profile: %w", err)
	}
	*t = s.profileOrder.next(userID)
	return nil
}

// readProfile reads userID's stored profile: none when they never set one.
func readProfile(ctx context.Context, tx pgx.Tx, userID int64) ([]chat.Profile, error) {
	rows, err := tx.Query(ctx, `SELECT user_id, display_name, avatar_url, about, updated_at FROM user_profile WHERE user_id = $1`, userID)
	if err != nil {
		return nil, fmt.Errorf("read profile: %w", err)
	}
	ps, err := pgx.CollectRows(rows, scanProfile)
	if err != nil {
		return nil, fmt.Errorf("read profile: %w", err)
	}
	return ps, nil
}

// announceProfile writes p's profile.updated to the outbox, the whole
// profile and nothing of who sees what of it, and returns it addressed to
// aud, to publish after the commit: every profile.updated goes this way,
// so that a node delivers the ones it committed as every other node
// delivers them from Kafka (chat.ProfileAudience.Events).
func announceProfile(ctx context.Context, tx pgx.Tx, p chat.Profile, aud chat.ProfileAudience) ([]chat.Event, error) {
	ev := chat.ProfileUpdatedEvent(p, nil)
	if err := insertOutbox(ctx, tx, chat.TraceContext{}, ev); err != nil {
		return nil, err
	}
	return aud.Events(ev), nil
}

// ProfileAudience returns who gets userID's profile.updated, and how
// (chat.ProfileAudience): a node that learns of a profile change from
// Kafka asks this.
func (s *Store) ProfileAudience(ctx context.Context, userID int64, largeGroup int) (chat.ProfileAudience, error) {
	var out chat.ProfileAudience
	err := s.runTx(ctx, "read profile audience", readOnly(), func(tx pgx.Tx) error {
		var err error
		out, err = profileAudience(ctx, tx, userID, largeGroup)
		return err
	})
	return out, err
}

// profileAudience reads userID's profile audience: userID and the users
// who share a conversation of at most largeGroup members with them,
// ascending, those userID blocked (blockedBySQL) in Blocked.
func profileAudience(ctx context.Context, tx pgx.Tx, userID int64, largeGroup int) (chat.ProfileAudience, error) {
	rows, err := tx.Query(ctx, `
		SELECT w.sharer, `+blockedBySQL("w.sharer", "$1")+` FROM (
			SELECT DISTINCT s.sharer FROM (`+smallSharersSQL("shm.user_id = $1", "$2")+`) s) w
		ORDER BY w.sharer`, userID, largeGroup)
	if err != nil {
		return chat.ProfileAudience{}, fmt.Errorf("read profile audience: %w", err)
	}
	var aud chat.ProfileAudience
	var user int64
	var blocked bool
	if _, err := pgx.ForEachRow(rows, []any{&user, &blocked}, func() error {
		if blocked {
			aud.Blocked = append(aud.Blocked, user)
		} else {
			aud.Whole = append(aud.Whole, user)
		}
		return nil
	}); err != nil {
		return chat.ProfileAudience{}, fmt.Errorf("read profile audience: %w", err)
	}
	if !slices.Contains(aud.Whole, userID) {
		aud.Whole = append(aud.Whole, userID)
		slices.Sort(aud.Whole)
	}
	return aud, nil
}

// Settings returns userID's privacy settings (both on without a row).
func (s *Store) Settings(ctx context.Context, userID int64) (chat.Settings, error) {
	st := chat.Settings{ReadReceipts: true, Presence: true}
	err := s.pool.QueryRow(ctx, `SELECT read_receipts, presence FROM user_settings WHERE user_id = $1`, userID).
		Scan(&st.ReadReceipts, &st.Presence)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return chat.Settings{}, classify("read settings", err)
	}
	return st, nil
}

// SetSettings changes the settings given and returns them all.
func (s *Store) SetSettings(ctx context.Context, userID int64, u chat.SettingsUpdate) (chat.Settings, error) {
	var st chat.Settings
	err := s.pool.QueryRow(ctx, `
		INSERT INTO user_settings AS s (user_id, read_receipts, presence) VALUES ($1, COALESCE($2, true), COALESCE($3, true))
		ON CONFLICT (user_id) DO UPDATE SET read_receipts = COALESCE($2, s.read_receipts), presence = COALESCE($3, s.presence),
			updated_at = now()
		RETURNING read_receipts, presence`, userID, u.ReadReceipts, u.Presence).Scan(&st.ReadReceipts, &st.Presence)
	if err != nil {
		return chat.Settings{}, classify("write settings", err)
	}
	return st, nil
}

// Block records that blockerID blocked blockedID (again is a no-op). A
// new block tells the blocker's profile again (setBlock).
func (s *Store) Block(ctx context.Context, blockerID, blockedID int64, largeGroup int) error {
	return s.orderedTx(ctx, "block", func(tx pgx.Tx, t **turn) ([]chat.Event, error) {
		if err := roomForBlock(ctx, tx, blockerID, blockedID); err != nil {
			return nil, err
		}
		return s.setBlock(ctx, tx, `INSERT INTO user_block (blocker_id, blocked_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			blockerID, blockedID, largeGroup, true, t)
	})
}

// roomForBlock refuses a block of blockedID that would take blockerID past
// chat.MaxBlocksPerUser (one already there passes: blocking again changes
// nothing). The blocker's blocks are serialised by a lock of their own,
// taken before the pair's (lockPairs), so two blocks at the cap cannot
// both see room: the count is a statement after the lock's, whose
// snapshot (READ COMMITTED) holds what the block it waited for wrote.
func roomForBlock(ctx context.Context, tx pgx.Tx, blockerID, blockedID int64) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('chat.blocks:' || $1::bigint, 0))`, blockerID); err != nil {
		return fmt.Errorf("lock the blocks: %w", err)
	}
	var n int
	var there bool
	if err := tx.QueryRow(ctx, `SELECT count(*), COALESCE(bool_or(blocked_id = $2), false) FROM user_block WHERE blocker_id = $1`,
		blockerID, blockedID).Scan(&n, &there); err != nil {
		return fmt.Errorf("count blocks: %w", err)
	}
	if !there && n >= chat.MaxBlocksPerUser {
		return chat.Errorf(chat.CodeConflict, "you block %d users already, the most one may: unblock one first", n)
	}
	return nil
}

// Unblock lifts a block (a missing one is a no-op). A lifted block tells
// the blocker's profile again (setBlock).
func (s *Store) Unblock(ctx context.Context, blockerID, blockedID int64, largeGroup int) error {
	return s.orderedTx(ctx, "unblock", func(tx pgx.Tx, t **turn) ([]chat.Event, error) {
		return s.setBlock(ctx, tx, `DELETE FROM user_block WHERE blocker_id = $1 AND blocked_id = $2`, blockerID, blockedID, largeGroup, false, t)
	})
}

// setBlock runs change (a write of user_block's row for the pair) and marks
// blockedID's member row of the pair's direct conversation, if they have
// one, with what it leaves: conversation_member.peer_blocked is the copy of
// user_block that the send function reads. When change changed the block,
// blockedID is in the audience of the blocker's profile (of largeGroup)
// and the profile has something a block hides (an avatar, an about), it
// announces the profile, unchanged, as a profile change does
// (announceProfile): blockedID's view of it changed (their client drops
// the avatar and about at the block, and shows them again at the unblock),
// on whichever node they are connected. The event, in the outbox and on
// Kafka, says nothing of the block. The profile's lock gives the write
// its turn to publish (t, lockProfile).
func (s *Store) setBlock(ctx context.Context, tx pgx.Tx, change string, blockerID, blockedID int64, largeGroup int, blocked bool, t **turn) ([]chat.Event, error) {
	if err := lockPairs(ctx, tx, blockerID, blockedID); err != nil {
		return nil, err
	}
	// The pair's direct conversation row, which a send locks before it
	// reads peer_blocked (chat_send_batch), is locked before the mark is
	// written: a send that read the old mark commits before this does,
	// and one after it reads the new mark. The mark's own row lock is not
	// enough: a send reads the mark before it locks the writer's member
	// row, so it could read the old mark, wait for this transaction, and
	// commit after the block answered. Lock order: the pair's, then the
	// conversation's (as AddMember), then the profile's.
	if _, err := tx.Exec(ctx, `
		SELECT 1 FROM direct_pair p JOIN conversation c ON c.id = p.conversation_id
		WHERE p.user_low = LEAST($1::bigint, $2::bigint) AND p.user_high = GREATEST($1::bigint, $2::bigint)
		FOR UPDATE OF c`, blockerID, blockedID); err != nil {
		return nil, fmt.Errorf("lock the direct conversation: %w", err)
	}
	tag, err := tx.Exec(ctx, change, blockerID, blockedID)
	if err != nil {
		return nil, fmt.Errorf("write block: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		UPDATE conversation_member m SET peer_blocked = $3
		FROM direct_pair p
		WHERE p.user_low = LEAST($1::bigint, $2::bigint) AND p.user_high = GREATEST($1::bigint, $2::bigint)
		  AND m.conversation_id = p.conversation_id AND m.user_id = $2 AND m.peer_blocked <> $3`,
		blockerID, blockedID, blocked); err != nil {
		return nil, fmt.Errorf("mark the direct conversation: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, nil
	}
	// After the blocker's profile writes in flight (SetProfile holds the
	// lock to its commit): one that read its audience before this block
	// has committed before the profile below is read, and one after it
	// reads the block.
	if err := s.lockProfile(ctx, tx, blockerID, t); err != nil {
		return nil, err
	}
	ps, err := readProfile(ctx, tx, blockerID)
	if err != nil || len(ps) == 0 || (ps[0].Avatar == nil && ps[0].About == "") {
		return nil, err // nothing the block hides
	}
	aud, err := profileAudience(ctx, tx, blockerID, largeGroup)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(aud.Whole, blockedID) && !slices.Contains(aud.Blocked, blockedID) {
		return nil, nil // not told of the blocker's profile
	}
	return announceProfile(ctx, tx, ps[0], aud)
}

// lockPairs serialises, for the rest of the transaction, the writers of a
// pair of users' blocks, their direct conversation's creation and one
// putting the other in a group, for each pair of a and one of others: so
// conversation_member.peer_blocked always equals user_block (run at once
// without it, a block could find no member row to mark while the creation
// did not see the block yet), and an add either sees a block of the pair
// or commits before the block does (refuseBlockers). The key is a hash of
// the pair (a collision only makes two unrelated pairs wait for each
// other). The pairs are locked in the order of the other user's id, which
// is the order of the pairs' (low, high) too, one order for every locker.
func lockPairs(ctx context.Context, tx pgx.Tx, a int64, others ...int64) error {
	// The aggregate takes the locks in the order its sorted input reaches
	// it.
	if _, err := tx.Exec(ctx, `
		SELECT count(pg_advisory_xact_lock(hashtextextended('chat.pair:' || LEAST($1::bigint, o) || ':' || GREATEST($1::bigint, o), 0)))
		FROM (SELECT DISTINCT o FROM unnest($2::bigint[]) AS t(o) ORDER BY o) p`,
		a, others); err != nil {
		return fmt.Errorf("lock the pairs: %w", err)
	}
	return nil
}

// Blocks lists who blockerID blocked, newest first.
func (s *Store) Blocks(ctx context.Context, blockerID int64) ([]chat.Block, error) {
	rows, err := s.pool.Query(ctx, `SELECT blocked_id, created_at FROM user_block WHERE blocker_id = $1 ORDER BY created_at DESC, blocked_id`, blockerID)
	if err != nil {
		return nil, classify("read blocks", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chat.Block, error) {
		var b chat.Block
		err := r.Scan(&b.UserID, &b.CreatedAt)
		b.CreatedAt = b.CreatedAt.UTC()
		return b, err
	})
	if err != nil {
		return nil, classify("read blocks", err)
	}
	if out == nil {
		out = []chat.Block{}
	}
	return out, nil
}

// BlockedBy returns those of users who blocked senderID, ascending.
func (s *Store) BlockedBy(ctx context.Context, senderID int64, users []int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT blocker_id FROM user_block WHERE blocked_id = $1 AND blocker_id = ANY($2::bigint[]) ORDER BY blocker_id`,
		senderID, users)
	if err != nil {
		return nil, classify("read blocks", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify("read blocks", err)
	}
	return ids, nil
}

// refuseBlocked fails with blocked when blockerID blocked userID.
func refuseBlocked(ctx context.Context, tx pgx.Tx, blockerID, userID int64) error {
	var blocked bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM user_block WHERE blocker_id = $1 AND blocked_id = $2)`,
		blockerID, userID).Scan(&blocked); err != nil {
		return fmt.Errorf("read blocks: %w", err)
	}
	if blocked {
		return chat.Errorf(chat.CodeBlocked, "user %d does not accept direct messages from you", blockerID)
	}
	return nil
}

// PresenceVisible reports whether viewerID may see subjectID's presence:
// neither hides theirs (reciprocal), and subjectID did not block viewerID.
func (s *Store) PresenceVisible(ctx context.Context, viewerID, subjectID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `
		SELECT NOT EXISTS (SELECT 1 FROM user_settings WHERE user_id IN ($1, $2) AND NOT presence)
		   AND NOT EXISTS (SELECT 1 FROM user_block WHERE blocker_id = $2 AND blocked_id = $1)`, viewerID, subjectID).Scan(&ok)
	if err != nil {
		return false, classify("read presence settings", err)
	}
	return ok, nil
}

// hiddenReaders returns, of users, those whose read receipts are off.
func hiddenReaders(ctx context.Context, tx pgx.Tx, users []int64) (map[int64]bool, error) {
	rows, err := tx.Query(ctx, `SELECT user_id FROM user_settings WHERE user_id = ANY($1::bigint[]) AND NOT read_receipts`, users)
	if err != nil {
		return nil, fmt.Errorf("read receipt settings: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read receipt settings: %w", err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// viewMembers prepares conv's members for viewer (viewWatermarks); a
// direct conversation gets its PeerID.
func viewMembers(ctx context.Context, tx pgx.Tx, conv *chat.Conversation, viewer int64) error {
	for _, m := range conv.Members {
		if conv.Type == chat.Direct && m.UserID != viewer {
			conv.PeerID = m.UserID
		}
	}
	return viewWatermarks(ctx, tx, conv.Members, viewer)
}

// viewMember is viewMembers for a reply that carries one member (a role
// change, an add of someone already in): every reply showing a member
// shows it as the conversation does.
func viewMember(ctx context.Context, tx pgx.Tx, m *chat.Member, viewer int64) error {
	ms := []chat.Member{*m}
	if err := viewWatermarks(ctx, tx, ms, viewer); err != nil {
		return err
	}
	*m = ms[0]
	return nil
}

// viewWatermarks shows viewer the members' watermarks. A delivered
// watermark is at least its member's read one, what was read was
// delivered: a member's own entries move their read watermark alone
// (chat_send_batch), and a delivered one below it would read as "read but
// not delivered". So it is counted for the other members' lowest
// watermarks (history, the inbox: peerReadSQL) and "seen by"
// (deliveredTo). Not for a member whose read receipts are off, shown to
// someone else: their reading must not show through their delivered
// watermark, which is then what their sessions acknowledged. Then the
// read watermarks viewer may not see read 0: a member's whose read
// receipts are off, and, when viewer's are off, every other member's
// (reciprocity).
func viewWatermarks(ctx context.Context, tx pgx.Tx, ms []chat.Member, viewer int64) error {
	ids := make([]int64, 0, len(ms)+1)
	for _, m := range ms {
		ids = append(ids, m.UserID)
	}
	hidden, err := hiddenReaders(ctx, tx, append(ids, viewer))
	if err != nil {
		return err
	}
	for i := range ms {
		m := &ms[i]
		if m.UserID == viewer || !hidden[m.UserID] {
			m.LastDeliveredSeq = max(m.LastDeliveredSeq, m.LastReadSeq)
		}
		if m.UserID != viewer && (hidden[viewer] || hidden[m.UserID]) {
			m.LastReadSeq = 0
		}
	}
	return nil
}

// readEventsPrivacy marks read.updated events for the read receipt
// settings of the members of their conversations: the event of a reader
// whose receipts are off is Private (their own sessions only); any other
// lists in Except the members whose receipts are off, who see nobody's.
func readEventsPrivacy(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, evs []chat.Event) error {
	if len(evs) == 0 {
		return nil
	}
	convs := make([]int64, 0, len(evs))
	for _, ev := range evs {
		convs = append(convs, ev.ConversationID)
	}
	rows, err := q.Query(ctx, hiddenMembersSQL, convs)
	if err != nil {
		return fmt.Errorf("read receipt settings: %w", err)
	}
	hidden, err := scanHiddenMembers(rows)
	if err != nil {
		return err
	}
	applyReadPrivacy(evs, hidden)
	return nil
}

// hiddenMembersSQL lists the members of $1's conversations whose read
// receipts are off.
const hiddenMembersSQL = `
SELECT m.conversation_id, m.user_id FROM conversation_member m
JOIN user_settings s ON s.user_id = m.user_id AND NOT s.read_receipts
WHERE m.conversation_id = ANY($1::bigint[])
ORDER BY 1, 2`

func scanHiddenMembers(rows pgx.Rows) (map[int64][]int64, error) {
	defer rows.Close()
	hidden := map[int64][]int64{}
	for rows.Next() {
		var c, u int64
		if err := rows.Scan(&c, &u); err != nil {
			return nil, fmt.Errorf("read receipt settings: %w", err)
		}
		hidden[c] = append(hidden[c], u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read receipt settings: %w", err)
	}
	return hidden, nil
}

func applyReadPrivacy(evs []chat.Event, hidden map[int64][]int64) {
	for i := range evs {
		ev := &evs[i]
		h := hidden[ev.ConversationID]
		if len(h) == 0 || ev.Type != chat.EventReadUpdated {
			continue
		}
		if _, ok := slices.BinarySearch(h, ev.UserID); ok {
			ev.Private = true
			continue
		}
		ev.Except = slices.Clone(h)
	}
}

// The members page cursor: role rank, joined_at (unix micros), user id,
// and the conversation it pages, so that a cursor of one conversation is
// refused on another (it would page that one from a position it never
// had) as a malformed one is. A cursor of three fields, made before the
// conversation was in it, is still taken on any conversation: a client may
// hold one across an upgrade, and cannot be told which it paged.
func encodeMembersCursor(conversationID int64, rank int, at time.Time, user int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(rank) + ":" + strconv.FormatInt(at.UnixMicro(), 10) + ":" +
		strconv.FormatInt(user, 10) + ":" + strconv.FormatInt(conversationID, 10)))
}

func decodeMembersCursor(conversationID int64, c string) (int, time.Time, int64, error) {
	bad := chat.Errorf(chat.CodeInvalid, "cursor is not one this server returned for conversation %d", conversationID)
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, time.Time{}, 0, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) == 4 {
		conv, err := strconv.ParseInt(parts[3], 10, 64)
		if err != nil || conv != conversationID {
			return 0, time.Time{}, 0, bad
		}
		parts = parts[:3]
	}
	if len(parts) != 3 {
		return 0, time.Time{}, 0, bad
	}
	rank, err1 := strconv.Atoi(parts[0])
	micros, err2 := strconv.ParseInt(parts[1], 10, 64)
	user, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || rank < 0 || rank > 2 || user <= 0 {
		return 0, time.Time{}, 0, bad
	}
	return rank, time.UnixMicro(micros), user, nil
}

// floorSQL is a member's history floor (chat.FloorHidesEdit) in SQL, for
// the aliases c (the conversation) and m (the member's
// conversation_member row): every query that needs it says it this way.
const floorSQL = `CASE WHEN c.type = 'GROUP' AND c.history_visible = 'joined' THEN m.join_seq ELSE 0 END`

// lastMessageAtSQL is conversation c's lastMessageAt as member m sees it:
// the time of its newest message, unless that message is at or before
// m's floor (f.floor, floorSQL), which m may not read, when of it m learns
// nothing, not even when it was written.
const lastMessageAtSQL = `CASE WHEN f.floor = 0 OR c.last_message_seq > f.floor THEN c.last_message_at END`

// historyFloor is the highest seq userID may not read in a conversation
// they are a member of: their join_seq in a group whose history is
// "joined", else 0. It fails like memberConversation for anyone else.
func historyFloor(ctx context.Context, tx pgx.Tx, conversationID, userID int64) (int64, error) {
	var (
		exists bool
		floor  *int64
	)
	err := tx.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM conversation WHERE id = $1),
		       (SELECT `+floorSQL+`
		        FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
		        WHERE m.conversation_id = $1 AND m.user_id = $2)`, conversationID, userID).Scan(&exists, &floor)
	switch {
	case err != nil:
		return 0, fmt.Errorf("read membership: %w", err)
	case !exists:
		return 0, errNoConversation(conversationID)
	case floor == nil:
		return 0, errNotMember(conversationID)
	}
	return *floor, nil
}
