package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
)

// A group's membership and settings. Every change here:
//
//   - locks the conversation row first (lockConversation), so concurrent
//     changes of one group, and its sends, run one after another, and
//     reads every member row after the lock (READ COMMITTED: the previous
//     holder's commit is visible), so two racing changes decide on the
//     same, current state. The owner and an admin leaving at once is such
//     a race: whichever commits second sees the other's outcome (a new
//     owner, or one admin fewer) and decides the successor from it;
//   - decides who may, then writes the change, its events (outbox rows, in
//     the order they are published), and the system entries members see in
//     history (appendSystem), in one transaction.
//
// Roles: the owner (one per group) and admins add members; only the owner
// adds admins, changes roles, changes historyVisible and transfers
// ownership. The owner removes anyone; an admin removes plain members; any
// member leaves. When the owner leaves, the longest-standing admin (earliest
// joined_at, then the lowest id) owns the group, else the longest-standing
// member; the last member leaving archives it (archiveIfEmpty).

// AddMember adds userID to a group. Owners and admins may add; adding an
// existing member returns them unchanged and writes nothing. The new member
// starts at the current last_seq (join_seq, read and delivered watermarks):
// history before joining is neither unread nor pending delivery, and in a
// group whose history is "joined" not readable either; the system entry
// announcing the join is the first entry they receive.
//
// role may be member (the default when empty) or admin (the owner only);
// owner cannot be granted: ownership moves with TransferOwnership.
func (s *Store) AddMember(ctx context.Context, conversationID, actorID, userID int64, role chat.Role) (chat.Member, bool, error) {
	if err := chat.ValidateID("user id", userID); err != nil {
		return chat.Member{}, false, err
	}
	switch role {
	case "":
		role = chat.RoleMember
	case chat.RoleMember, chat.RoleAdmin:
	default:
		return chat.Member{}, false, chat.Errorf(chat.CodeInvalid, "role must be %s or %s", chat.RoleMember, chat.RoleAdmin)
	}
	var added chat.Member
	created := false
	err := s.changeTx(ctx, "add member", conversationID, func(tx pgx.Tx) ([]chat.Event, error) {
		conv, actor, err := lockGroupToManage(ctx, tx, conversationID, actorID, "get more members", "add members")
		if err != nil {
			return nil, err
		}
		if role == chat.RoleAdmin && actor.Role != chat.RoleOwner {
			return nil, chat.Errorf(chat.CodeForbidden, "only the owner can add an admin")
		}
		existing, ok, err := getMember(ctx, tx, conversationID, userID)
		if err != nil {
			return nil, err
		}
		if ok {
			added = existing
			return nil, viewMember(ctx, tx, &added, actorID)
		}
		if err := refuseBlockers(ctx, tx, actorID, []int64{userID}); err != nil {
			return nil, err
		}
		var n int
		if err := tx.QueryRow(ctx,
			`SELECT member_count FROM conversation WHERE id = $1`, conversationID).Scan(&n); err != nil {
			return nil, fmt.Errorf("count members: %w", err)
		}
		if n >= s.limits.MaxMembers {
			return nil, chat.Errorf(chat.CodeMemberCap, "a group has at most %d members", s.limits.MaxMembers)
		}
		// joined_at is the time of this insert, under the group's lock,
		// not the transaction's start (now(), the column's default): an
		// add that began first but waited for the lock joins second, and
		// join times must order members as their member.added entries do.
		if added, err = scanMember(tx.QueryRow(ctx, `
			INSERT INTO conversation_member
				(conversation_id, user_id, role, join_seq, last_read_seq, last_delivered_seq, joined_at)
			VALUES ($1, $2, $3, $4, $4, $4, clock_timestamp())
			RETURNING `+memberColumns,
			conversationID, userID, role, conv.LastSeq)); err != nil {
			return nil, fmt.Errorf("insert member: %w", err)
		}
		created = true
		if err := viewMember(ctx, tx, &added, actorID); err != nil {
			return nil, err
		}
		// member.added first: it starts the new member's streams at
		// join_seq, so the entry after it reaches them too.
		ev := chat.MemberAddedEvent(conv, userID, actorID, added.Role)
		if err := lockSharing(ctx, tx, conversationID, []int64{userID}, s.largeGroup); err != nil {
			return nil, err
		}
		if ev.PresenceShown, err = presenceStarted(ctx, tx, conversationID, []int64{userID}, s.largeGroup); err != nil {
			return nil, err
		}
		if err := insertOutbox(ctx, tx, chat.TraceContext{}, ev); err != nil {
			return nil, err
		}
		entries, err := appendSystem(ctx, tx, conversationID, actorID,
			chat.SystemEntry{Action: chat.SystemMemberAdded, UserID: userID, Role: added.Role})
		if err != nil {
			return nil, err
		}
		return append([]chat.Event{ev}, systemEvents(entries)...), nil
	})
	if err != nil {
		return chat.Member{}, false, err
	}
	return added, created, nil
}

// RemoveMember removes userID from a group, or lets actorID leave
// (userID == actorID). See the roles above; the owner cannot be removed,
// only leave. A leave by someone who already left or was removed succeeds
// and writes nothing, as a repeated add does: the first answer may have
// been lost, and its retry must not tell them they failed to leave. So
// does a removal repeated by whoever removed the member last, in their
// current membership (removedBy): not by
// another admin, who would otherwise learn that someone not in the group
// once was (the history before their join may be hidden from them).
func (s *Store) RemoveMember(ctx context.Context, conversationID, actorID, userID int64) error {
	return s.changeTx(ctx, "remove member", conversationID, func(tx pgx.Tx) ([]chat.Event, error) {
		conv, actor, err := lockGroup(ctx, tx, conversationID, actorID, "lose members")
		if userID == actorID && chat.ErrorCode(err) == chat.CodeNotMember {
			left, lerr := leftGroup(ctx, tx, conversationID, actorID)
			if lerr != nil {
				return nil, lerr
			}
			if left {
				return nil, nil
			}
		}
		if err != nil {
			return nil, err
		}
		target := actor
		if userID != actorID {
			// The right first: a plain member learns nothing about the
			// target, not even whether they are a member.
			if actor.Role != chat.RoleOwner && actor.Role != chat.RoleAdmin {
				return nil, chat.Errorf(chat.CodeForbidden, "only the owner or an admin can remove members")
			}
			var ok bool
			if target, ok, err = getMember(ctx, tx, conversationID, userID); err != nil {
				return nil, err
			}
			if !ok {
				removed, err := removedBy(ctx, tx, conversationID, actorID, userID)
				if err != nil {
					return nil, err
				}
				if removed {
					return nil, nil
				}
				return nil, chat.Errorf(chat.CodeNotFound, "user %d is not a member of conversation %d", userID, conversationID)
			}
			switch {
			case target.Role == chat.RoleOwner:
				return nil, chat.Errorf(chat.CodeForbidden, "the owner can only leave, not be removed")
			case actor.Role == chat.RoleOwner:
			case target.Role != chat.RoleMember: // the actor is an admin
				return nil, chat.Errorf(chat.CodeForbidden, "an admin removes plain members only; only the owner removes an admin")
			}
		}
		// The successor is chosen before any member row is locked: roles
		// and join times change only under the conversation lock, which
		// this transaction holds, so the choice cannot go stale. Then the
		// rows this change writes are locked together, in key order.
		var successor int64
		if target.Role == chat.RoleOwner {
			if successor, err = chooseSuccessor(ctx, tx, conversationID, target.UserID); err != nil {
				return nil, err
			}
		}
		if err := lockMembers(ctx, tx, conversationID, target.UserID, successor); err != nil {
			return nil, err
		}
		var joinSeq int64
		if err := tx.QueryRow(ctx,
			`DELETE FROM conversation_member WHERE conversation_id = $1 AND user_id = $2 RETURNING join_seq`,
			conversationID, target.UserID).Scan(&joinSeq); err != nil {
			return nil, fmt.Errorf("delete member: %w", err)
		}
		if err := oweUntilLeave(ctx, tx, conversationID, target.UserID, joinSeq, conv.LastSeq); err != nil {
			return nil, err
		}
		// member.removed first: the removed member's streams stop before
		// the entries that follow, which are for those who stay.
		removed := chat.MemberRemovedEvent(conversationID, target.UserID, actorID, conv.LastSeq)
		if err := lockSharing(ctx, tx, conversationID, []int64{target.UserID}, s.largeGroup); err != nil {
			return nil, err
		}
		if removed.PresenceHiddenFrom, removed.PresenceHidden, err = presenceEnded(ctx, tx, conversationID, target.UserID, s.largeGroup); err != nil {
			return nil, err
		}
		evs := []chat.Event{removed}
		if err := insertOutbox(ctx, tx, chat.TraceContext{}, evs...); err != nil {
			return nil, err
		}
		entry := chat.SystemEntry{Action: chat.SystemMemberRemoved, UserID: target.UserID}
		if target.UserID == actorID {
			entry.Action = chat.SystemMemberLeft
		}
		sys := []chat.SystemEntry{entry}
		if successor != 0 {
			if _, err := tx.Exec(ctx, `UPDATE conversation_member SET role = 'owner' WHERE conversation_id = $1 AND user_id = $2`,
				conversationID, successor); err != nil {
				return nil, fmt.Errorf("pass ownership: %w", err)
			}
			sys = append(sys, chat.SystemEntry{Action: chat.SystemOwnerChanged, UserID: successor, Role: chat.RoleOwner})
		}
		if err := archiveIfEmpty(ctx, tx, conversationID); err != nil {
			return nil, err
		}
		entries, err := appendSystem(ctx, tx, conversationID, actorID, sys...)
		if err != nil {
			return nil, err
		}
		evs = append(evs, systemEvents(entries)...)
		if successor != 0 {
			up := chat.MemberUpdatedEvent(conversationID, successor, actorID, chat.RoleOwner, entries[len(entries)-1].Seq)
			if err := insertOutbox(ctx, tx, chat.TraceContext{}, up); err != nil {
				return nil, err
			}
			evs = append(evs, up)
		}
		return evs, nil
	})
}

// presenceEndedSQL: the members of conversation $1, which $2 just left
// (the delete's statement trigger counted them), when it had at most $3
// members with $2, who share no other conversation of at most $3 members
// with $2: they and $2 no longer see each other's presence. Only those
// who could (neither hides their presence), with whether $2 blocked them
// and whether they blocked $2, which hid one's presence from the other
// already. One statement whatever the group's size; its reads come after
// lockSharing's locks.
//
// What it reads depends on the members of $1 (the candidates), not on
// everyone $2 shares a conversation with. k: $2's other small
// conversations, a row each, the largest first. Those smaller than $1
// are read whole (each costs less to read than to look every candidate
// up in). A candidate not among their members is looked up (an index
// probe) in $2's largest conversation, which for a team whose groups
// all hold them answers at once; when not, a candidate in at most
// probeFew conversations (probeFew + 1 index entries tell) has each of
// their memberships probe $2's (one in a single group with someone in
// hundreds of groups of strangers); any other is looked up in each of
// $2's conversations at least as large as $1 until one has them. So at
// most the members of the smaller ones, and per candidate a probe, a
// count of at most probeFew + 1 of their memberships, and either two
// probes for each of those (at most probeFew) or one for each larger
// conversation of $2's (which has more members than there are
// candidates), none after the first found. Reading every sharer of $2 and keeping
// the candidates among none of them reads each of $2's conversations
// whole instead (12,000 rows for a member of a team of 200 in 60
// groups), and probing each candidate's memberships reads all of them
// for candidates in many conversations who share none with $2 (60
// direct conversations each: 12,000 lookups): the planner picked one or
// the other from the statistics. docs/benchmarks.md, "Presence on a
// removal". The OFFSET 0s keep each probe a nested index lookup that
// stops at the first row, whatever the estimates.
var presenceEndedSQL = `
WITH k AS MATERIALIZED (
	SELECT km.id, km.n, km.n >= (SELECT c.member_count FROM conversation c WHERE c.id = $1) AS probe
	FROM (SELECT km.conversation_id AS id, (SELECT kc.member_count FROM conversation kc WHERE kc.id = km.conversation_id) AS n
	      FROM conversation_member km WHERE km.user_id = $2 OFFSET 0) km
	WHERE km.n <= $3
	ORDER BY km.n DESC, km.id
)
SELECT o.user_id, ` + blockedBySQL("o.user_id", "$2") + `, ` + blockedBySQL("$2", "o.user_id") + `
FROM conversation c
JOIN conversation_member o ON o.conversation_id = c.id
WHERE c.id = $1 AND c.member_count < $3
  AND NOT EXISTS (SELECT 1 FROM user_settings h WHERE h.user_id IN ($2, o.user_id) AND NOT h.presence)
  AND o.user_id NOT IN (
	SELECT s.user_id FROM k
	CROSS JOIN LATERAL (SELECT s.user_id FROM conversation_member s WHERE s.conversation_id = k.id OFFSET 0) s
	WHERE NOT k.probe)
  AND NOT CASE
	WHEN NOT EXISTS (SELECT 1 FROM k WHERE k.probe) THEN false
	WHEN EXISTS (SELECT 1 FROM conversation_member f WHERE f.conversation_id = (SELECT k.id FROM k WHERE k.probe ORDER BY k.n DESC, k.id LIMIT 1) AND f.user_id = o.user_id) THEN true
	WHEN (SELECT count(*) FROM (SELECT FROM conversation_member d WHERE d.user_id = o.user_id LIMIT ` + probeFew + ` + 1) d) <= ` + probeFew + `
	THEN EXISTS (
		SELECT 1 FROM conversation_member p
		CROSS JOIN LATERAL (SELECT 1 FROM conversation_member r WHERE r.conversation_id = p.conversation_id AND r.user_id = $2 OFFSET 0) r
		CROSS JOIN LATERAL (SELECT 1 FROM conversation pc WHERE pc.id = p.conversation_id AND pc.member_count <= $3 OFFSET 0) pc
		WHERE p.user_id = o.user_id OFFSET 0)
	ELSE EXISTS (
		SELECT 1 FROM k
		CROSS JOIN LATERAL (SELECT 1 FROM conversation_member p WHERE p.conversation_id = k.id AND p.user_id = o.user_id OFFSET 0) p
		WHERE k.probe OFFSET 0)
	END
ORDER BY o.user_id`

// probeFew is the most conversations a candidate of presenceEndedSQL may
// be in for their own memberships to be probed rather than $2's larger
// conversations.
const probeFew = "4"

// presenceEnded reads, after userID's member row of conversationID was
// deleted, whom the removal stops sharing presence with (presenceEndedSQL):
// hiddenFrom, who may no longer see userID's presence; hidden, whose
// presence userID may no longer see.
func presenceEnded(ctx context.Context, tx pgx.Tx, conversationID, userID int64, largeGroup int) (hiddenFrom, hidden []int64, err error) {
	rows, err := tx.Query(ctx, presenceEndedSQL, conversationID, userID, largeGroup)
	if err != nil {
		return nil, nil, fmt.Errorf("read whose presence the removal hides: %w", err)
	}
	var other int64
	var blocked, blocks bool
	if _, err := pgx.ForEachRow(rows, []any{&other, &blocked, &blocks}, func() error {
		if !blocked {
			hiddenFrom = append(hiddenFrom, other)
		}
		if !blocks {
			hidden = append(hidden, other)
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("read whose presence the removal hides: %w", err)
	}
	return hiddenFrom, hidden, nil
}

// presenceStartedSQL: the pairs of members (watcher, subject) of
// conversation $1, when it has at most $3 members, who share no other
// conversation of at most $3 members, one or both of whom ($2) just
// joined it: the watcher may now see the subject's presence. Each pair
// once (n, a new member; o, the other: the lower id is n when both are
// new), less those who share another, then each way, where neither
// hides their presence and the subject did not block the watcher. One
// statement whatever the group's size; its reads come after
// lockSharing's locks.
//
// Who shares another is found in time linear in what it reads, whatever
// the shape of the members' other conversations: the joined users'
// other small conversations, each read once however many of the joined
// are in it (k), and of their members only those of $1 (x), numbered by
// a bit each (m.i, of m.size bits); each such conversation with two or
// more of them gives the bits of its members (cmask); each member, the
// union of those of its conversations (umask): the members of $1 it
// shares another with. cmask gives each row of x its conversation's bits
// (a window), not a row per conversation joined back to x: that join,
// with the just-inserted members estimated at a few rows, was planned as
// a loop over x rescanning the grouped conversations, read them all once
// per row of x (a group of 200 who
// each have 60 direct conversations with others: 12,000 × 12,000,
// 10-13 s for the create). Subtracting the pairs of every joined user's sharers
// instead read each conversation once per joined member in it (a team
// of 200 sharing 60 groups: 2.4M rows for its next group, 0.3-1 s), and
// looking each pair up (an index probe per membership until one is
// shared) read every membership of each pair that shares nothing (a
// group of 200 who each have 60 direct conversations with others: 2 s);
// docs/benchmarks.md, "Presence on a join".
var presenceStartedSQL = `
WITH m AS (
	SELECT cm.user_id AS u, (row_number() OVER (ORDER BY cm.user_id) - 1)::int AS i, (count(*) OVER ())::int AS size
	FROM conversation c JOIN conversation_member cm ON cm.conversation_id = c.id
	WHERE c.id = $1 AND c.member_count <= $3
),
x AS (
	SELECT km.conversation_id AS c, m.u, m.i, m.size
	FROM (SELECT DISTINCT jm.conversation_id
	      FROM conversation_member jm JOIN conversation jc ON jc.id = jm.conversation_id AND jc.member_count <= $3
	      WHERE jm.user_id = ANY($2::bigint[]) AND jm.conversation_id <> $1) k
	JOIN conversation_member km ON km.conversation_id = k.conversation_id
	JOIN m ON m.u = km.user_id
),
cmask AS (
	SELECT x.u, count(*) OVER w AS k, bit_or(set_bit(repeat('0', x.size)::varbit, x.i, 1)) OVER w AS bits
	FROM x WINDOW w AS (PARTITION BY x.c)
),
umask AS (
	SELECT cmask.u, bit_or(cmask.bits) AS bits FROM cmask WHERE cmask.k > 1 GROUP BY cmask.u
),
p AS (
	SELECT n.u AS n, o.u AS o
	FROM m n
	JOIN m o ON o.u <> n.u AND (o.u > n.u OR o.u <> ALL($2::bigint[]))
	LEFT JOIN umask s ON s.u = n.u
	WHERE n.u = ANY($2::bigint[]) AND (s.bits IS NULL OR get_bit(s.bits, o.i) = 0)
)
SELECT d.watcher, d.subject
FROM p CROSS JOIN LATERAL (VALUES (p.n, p.o), (p.o, p.n)) d(watcher, subject)
WHERE NOT EXISTS (SELECT 1 FROM user_settings h WHERE h.user_id IN (p.n, p.o) AND NOT h.presence)
  AND NOT ` + blockedBySQL("d.watcher", "d.subject") + `
ORDER BY d.watcher, d.subject`

// lockSharing serialises, for the rest of the transaction, the
// membership changes whose presence statements (presenceStartedSQL,
// presenceEndedSQL) decide about a pair in common, so that the later of
// two reads the earlier's commit: movers just joined or left
// conversationID, and when it has at most largeGroup members (when those
// statements decide anything), each mover's key is taken exclusively
// and its other members' keys shared. A change of X in conversation C
// decides about the pairs of X and C's members; one of Y in D about Y
// and D's members. They decide about a pair in common only when X = Y
// (both hold X exclusively) or X is in D and Y in C (each holds the
// other's key shared and its own mover's exclusively): they wait for
// each other then (and when only one of X in D, Y in C holds). Without
// it, Y removed from D while X, who shares D with Y, joins C, which Y is
// in, each reads the other's conversation as before: the join finds
// them sharing D (telling nothing), the removal finds them sharing
// nothing else (telling each the other's presence hidden), and they end
// up sharing C, told hidden. A lock of the joining or leaving user alone
// would not order these two (X is not Y).
// Changes to different members' pairs (two adds to groups of a team)
// only share keys shared, and wait for nothing; a send takes none.
// Keys are taken in the order of the key, one order for every locker
// (a hash of the user id: a collision only makes two users wait for each
// other), after the conversation's lock and the pairs' (lockPairs),
// before any read that decides.
func lockSharing(ctx context.Context, tx pgx.Tx, conversationID int64, movers []int64, largeGroup int) error {
	// The aggregate takes the locks in the order its sorted input reaches
	// it (lockPairs).
	if _, err := tx.Exec(ctx, `
		SELECT count(CASE WHEN l.mover THEN pg_advisory_xact_lock(l.k) ELSE pg_advisory_xact_lock_shared(l.k) END)
		FROM (SELECT hashtextextended('chat.sharing:' || a.u, 0) AS k, bool_or(a.mover) AS mover
		      FROM conversation c
		      CROSS JOIN LATERAL (SELECT u, true FROM unnest($2::bigint[]) AS t(u)
		                          UNION ALL
		                          SELECT m.user_id, false FROM conversation_member m WHERE m.conversation_id = c.id) a(u, mover)
		      WHERE c.id = $1 AND c.member_count <= $3
		      GROUP BY 1 ORDER BY 1) l`,
		conversationID, movers, largeGroup); err != nil {
		return fmt.Errorf("lock the sharing of presence: %w", err)
	}
	return nil
}

// maxPresenceStarted is the most members a group created at once may
// have for its conversation.created to list who may now see whose
// presence: n × (n - 1) pairs, about 40,000 ids (under half a megabyte
// with ten-digit ids) at the default CHAT_LARGE_GROUP, and a
// statement of tens of milliseconds. A larger one (CHAT_LARGE_GROUP
// raised past it) lists nobody: its event would outgrow what the relay
// hands Kafka (1 MiB a row), and its transaction the time of a create.
const maxPresenceStarted = chat.DefaultLargeGroup

// presenceStarted reads, after joined were inserted as members of
// conversationID, who may now see whose presence (presenceStartedSQL):
// each watcher with the subjects, for chat.Event.PresenceShown.
func presenceStarted(ctx context.Context, tx pgx.Tx, conversationID int64, joined []int64, largeGroup int) (map[int64][]int64, error) {
	rows, err := tx.Query(ctx, presenceStartedSQL, conversationID, joined, largeGroup)
	if err != nil {
		return nil, fmt.Errorf("read whose presence the join shows: %w", err)
	}
	var shown map[int64][]int64
	var watcher, subject int64
	if _, err := pgx.ForEachRow(rows, []any{&watcher, &subject}, func() error {
		if shown == nil {
			shown = map[int64][]int64{}
		}
		shown[watcher] = append(shown[watcher], subject)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read whose presence the join shows: %w", err)
	}
	return shown, nil
}

// removedBy says whether userID, not a member now, was removed last by
// actorID in actorID's current membership: the latest leave or removal
// about userID is actorID's removal and comes after actorID's join
// (join_seq, the last seq when they were added). A member who left and
// was added back is a new member who removed nobody: a removal before
// their leave makes theirs no retry.
func removedBy(ctx context.Context, tx pgx.Tx, conversationID, actorID, userID int64) (bool, error) {
	var removed bool
	err := tx.QueryRow(ctx, `
		SELECT r.sender_id = $3 AND r.body::jsonb->>'action' = $4 AND r.seq > (
			SELECT a.join_seq FROM conversation_member a WHERE a.conversation_id = $1 AND a.user_id = $3)
		FROM message r
		WHERE r.conversation_id = $1 AND r.kind = 'system'
		  AND r.body::jsonb @> jsonb_build_object('userId', $2::bigint)
		  AND r.body::jsonb->>'action' = ANY($5::text[])
		ORDER BY r.seq DESC LIMIT 1`,
		conversationID, userID, actorID, string(chat.SystemMemberRemoved),
		[]string{string(chat.SystemMemberLeft), string(chat.SystemMemberRemoved)}).Scan(&removed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the last removal of user %d: %w", userID, err)
	}
	return removed, nil
}

// leftGroup says whether userID, not a member now, once was one of the
// group: their leave or removal is a system entry of its stream.
func leftGroup(ctx context.Context, tx pgx.Tx, conversationID, userID int64) (bool, error) {
	_, _, left, err := lastSystemEntry(ctx, tx, conversationID, userID, chat.SystemMemberLeft, chat.SystemMemberRemoved)
	return left, err
}

// lastSystemEntry finds the group's latest system entry about userID
// whose action is one of actions: who wrote it and which action it is;
// ok is false when there is none. Entries are kept as long as the group,
// so they tell a former member from someone who never was one, and who
// made a change that a retry repeats; message_system_idx reads the
// group's few system entries, newest first, not its history.
func lastSystemEntry(ctx context.Context, tx pgx.Tx, conversationID, userID int64, actions ...chat.SystemAction) (actorID int64, action chat.SystemAction, ok bool, err error) {
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = string(a)
	}
	err = tx.QueryRow(ctx, `
		SELECT sender_id, body::jsonb->>'action' FROM message
		WHERE conversation_id = $1 AND kind = 'system'
		  AND body::jsonb @> jsonb_build_object('userId', $2::bigint)
		  AND body::jsonb->>'action' = ANY($3::text[])
		ORDER BY seq DESC LIMIT 1`,
		conversationID, userID, names).Scan(&actorID, &action)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("read the last %v of user %d: %w", actions, userID, err)
	}
	return actorID, action, true, nil
}

// refuseBlockers refuses to have actorID put any of ids in a group when
// one of them blocked actorID (403 blocked): someone who blocked you
// cannot be added by you, as most chat apps have it ("this person can't
// be added"). Anyone else may add them, and a blocker may add whom they
// blocked. It first takes the pairs' locks (lockPairs), which a block
// takes too: a block committing meanwhile is either seen here, or waits
// until the add has committed (the member then exists before the block).
func refuseBlockers(ctx context.Context, tx pgx.Tx, actorID int64, ids []int64) error {
	if err := lockPairs(ctx, tx, actorID, ids...); err != nil {
		return err
	}
	var blocker int64
	err := tx.QueryRow(ctx, `
		SELECT blocker_id FROM user_block WHERE blocked_id = $1 AND blocker_id = ANY($2::bigint[])
		ORDER BY blocker_id LIMIT 1`, actorID, ids).Scan(&blocker)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read blocks: %w", err)
	}
	return chat.Errorf(chat.CodeBlocked, "user %d blocked you: you cannot add them to a group", blocker)
}

// lockGroup locks the conversation and reads the actor's membership: not
// a member, or a direct conversation (whose membership never changes), is
// refused.
func lockGroup(ctx context.Context, tx pgx.Tx, conversationID, actorID int64, change string) (chat.Conversation, chat.Member, error) {
	conv, err := lockConversation(ctx, tx, conversationID)
	if err != nil {
		return conv, chat.Member{}, err
	}
	actor, ok, err := getMember(ctx, tx, conversationID, actorID)
	if err != nil {
		return conv, actor, err
	}
	if !ok {
		return conv, actor, errNotMember(conversationID)
	}
	if conv.Type == chat.Direct {
		return conv, actor, chat.Errorf(chat.CodeForbidden, "a direct conversation cannot %s", change)
	}
	return conv, actor, nil
}

// lockGroupToManage is lockGroup for a change only the owner or an admin
// may make; what names it in the refusal of the others.
func lockGroupToManage(ctx context.Context, tx pgx.Tx, conversationID, actorID int64, change, what string) (chat.Conversation, chat.Member, error) {
	conv, actor, err := lockGroup(ctx, tx, conversationID, actorID, change)
	if err == nil && actor.Role != chat.RoleOwner && actor.Role != chat.RoleAdmin {
		err = chat.Errorf(chat.CodeForbidden, "only the owner or an admin can %s", what)
	}
	return conv, actor, err
}

// chooseSuccessor returns who owns the group when its owner leaves: the
// longest-standing admin, else the longest-standing member; 0 when nobody
// else is left. The caller holds the conversation lock.
func chooseSuccessor(ctx context.Context, tx pgx.Tx, conversationID, ownerID int64) (int64, error) {
	var next int64
	err := tx.QueryRow(ctx, `
		SELECT user_id FROM conversation_member WHERE conversation_id = $1 AND user_id <> $2
		ORDER BY role = 'admin' DESC, joined_at, user_id LIMIT 1`, conversationID, ownerID).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("choose the next owner: %w", err)
	}
	return next, nil
}

// lockMembers locks the member rows of users (0s are skipped) that a
// membership change is about to write, after the conversation row and in
// user id order: the project's lock order (migrations/functions.sql), which
// read-receipt and send batches follow too. Writing them one by one, or in
// one statement, would lock them in the order of the change's logic or of
// the plan's scan (a sequential scan meets them in heap order), and a
// batch holding one of them while waiting for another would deadlock with
// the change.
func lockMembers(ctx context.Context, tx pgx.Tx, conversationID int64, users ...int64) error {
	// ORDER BY is applied before FOR UPDATE: the rows are locked in
	// user_id order whatever the scan.
	if _, err := tx.Exec(ctx, `
		SELECT 1 FROM conversation_member WHERE conversation_id = $1 AND user_id = ANY($2::bigint[])
		ORDER BY user_id FOR UPDATE`, conversationID, users); err != nil {
		return fmt.Errorf("lock members: %w", err)
	}
	return nil
}

// archiveIfEmpty marks a group nobody is a member of any more and
// releases its avatar upload: a group's avatar is fetched by its current
// members, and an archived group has none, nor ever will again (only a
// member adds one), so its bytes would be kept for nobody. The caller
// holds the conversation lock, which orders this before the attachment
// row as every avatar change does.
func archiveIfEmpty(ctx context.Context, tx pgx.Tx, conversationID int64) error {
	var avatar *string
	err := tx.QueryRow(ctx, `
		UPDATE conversation c SET archived_at = now(), avatar_url = NULL, avatar_upload_id = NULL
		FROM (SELECT avatar_upload_id FROM conversation WHERE id = $1) old
		WHERE c.id = $1 AND NOT EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = $1)
		RETURNING old.avatar_upload_id`, conversationID).Scan(&avatar)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // members are left
	}
	if err != nil {
		return fmt.Errorf("archive conversation: %w", err)
	}
	if avatar == nil {
		return nil
	}
	return releaseAvatar(ctx, tx, *avatar, "group archived")
}

var _ chat.PeopleStore = (*Store)(nil)

// UpdateGroup changes a group's title, about, avatar or historyVisible:
// the owner or an admin, historyVisible the owner only. It writes one
// system entry listing what changed and conversation.updated with the
// settings after it; asking for what already is writes nothing.
func (s *Store) UpdateGroup(ctx context.Context, conversationID, actorID int64, u chat.GroupUpdate) (chat.Conversation, error) {
	var out chat.Conversation
	err := s.changeTx(ctx, "update group", conversationID, func(tx pgx.Tx) ([]chat.Event, error) {
		conv, actor, err := lockGroupToManage(ctx, tx, conversationID, actorID, "be renamed or changed", "change the group")
		if err != nil {
			return nil, err
		}
		if u.HistoryVisible != nil && actor.Role != chat.RoleOwner && *u.HistoryVisible != conv.HistoryVisible {
			return nil, chat.Errorf(chat.CodeForbidden, "only the owner can change who reads the history")
		}
		var cur *string
		if err := tx.QueryRow(ctx, `SELECT avatar_upload_id FROM conversation WHERE id = $1`, conversationID).Scan(&cur); err != nil {
			return nil, fmt.Errorf("read the group's avatar: %w", err)
		}
		av, err := planAvatar(ctx, tx, u.AvatarURL, u.AvatarUploadID, cur, actorID, conversationID)
		if err != nil {
			return nil, err
		}
		entry := chat.SystemEntry{Action: chat.SystemGroupUpdated}
		changed := false
		if u.Title != nil && *u.Title != conv.Title {
			conv.Title, entry.Title, changed = *u.Title, u.Title, true
		}
		if u.About != nil && *u.About != conv.About {
			conv.About, entry.About, changed = *u.About, u.About, true
		}
		if av.url != nil && *av.url != strOrEmpty(conv.Avatar) {
			entry.Avatar, changed = av.url, true
			conv.Avatar = nil
			if *av.url != "" {
				conv.Avatar = av.url
			}
		}
		if u.HistoryVisible != nil && *u.HistoryVisible != conv.HistoryVisible {
			conv.HistoryVisible, entry.HistoryVisible, changed = *u.HistoryVisible, *u.HistoryVisible, true
		}
		if !changed {
			out = conv
			return nil, memberViewFor(ctx, tx, &out, actorID)
		}
		if _, err := tx.Exec(ctx, `UPDATE conversation SET title = $2, about = $3, avatar_url = $4, avatar_upload_id = $5,
			history_visible = $6 WHERE id = $1`,
			conversationID, conv.Title, conv.About, conv.Avatar, av.uploadID, conv.HistoryVisible); err != nil {
			return nil, fmt.Errorf("update conversation: %w", err)
		}
		if err := av.release(ctx, tx, cur); err != nil {
			return nil, err
		}
		entries, err := appendSystem(ctx, tx, conversationID, actorID, entry)
		if err != nil {
			return nil, err
		}
		conv.LastSeq = entries[0].Seq
		ev := chat.ConversationUpdatedEvent(conv, actorID, entries[0].Seq)
		if err := insertOutbox(ctx, tx, chat.TraceContext{}, ev); err != nil {
			return nil, err
		}
		out = conv
		return append(systemEvents(entries), ev), memberViewFor(ctx, tx, &out, actorID)
	})
	if err != nil {
		return chat.Conversation{}, err
	}
	return out, nil
}

// memberViewFor sets what of conv depends on userID, a member: its
// lastMessageAt as they see it (lastMessageAtSQL), under the settings tx
// wrote, and their joinSeq.
func memberViewFor(ctx context.Context, tx pgx.Tx, conv *chat.Conversation, userID int64) error {
	c, err := memberConversation(ctx, tx, conv.ID, userID)
	if err != nil {
		return err
	}
	conv.LastMessageAt, conv.JoinSeq = c.LastMessageAt, c.JoinSeq
	return nil
}

func strOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// SetRole makes userID an admin or a plain member: the owner only, not of
// the owner (ownership moves with TransferOwnership). Asking for the role
// the member has writes nothing.
func (s *Store) SetRole(ctx context.Context, conversationID, actorID, userID int64, role chat.Role) (chat.Member, error) {
	// Here, not only in the Service: a group has one owner whoever calls.
	if role != chat.RoleAdmin && role != chat.RoleMember {
		return chat.Member{}, chat.Errorf(chat.CodeInvalid, "role must be %s or %s (ownership moves with TransferOwnership)", chat.RoleAdmin, chat.RoleMember)
	}
	var out chat.Member
	err := s.changeTx(ctx, "set role", conversationID, func(tx pgx.Tx) ([]chat.Event, error) {
		_, actor, err := lockGroup(ctx, tx, conversationID, actorID, "have roles")
		if err != nil {
			return nil, err
		}
		if actor.Role != chat.RoleOwner {
			return nil, chat.Errorf(chat.CodeForbidden, "only the owner can change roles")
		}
		target, ok, err := getMember(ctx, tx, conversationID, userID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, chat.Errorf(chat.CodeNotFound, "user %d is not a member of conversation %d", userID, conversationID)
		}
		if target.Role == chat.RoleOwner {
			return nil, chat.Errorf(chat.CodeInvalid, "the owner's role changes only by transferring ownership (POST .../owner)")
		}
		out = target
		if err := viewMember(ctx, tx, &out, actorID); err != nil {
			return nil, err
		}
		if target.Role == role {
			return nil, nil
		}
		if _, err := tx.Exec(ctx, `UPDATE conversation_member SET role = $3 WHERE conversation_id = $1 AND user_id = $2`,
			conversationID, userID, role); err != nil {
			return nil, fmt.Errorf("update role: %w", err)
		}
		out.Role = role
		entries, err := appendSystem(ctx, tx, conversationID, actorID,
			chat.SystemEntry{Action: chat.SystemRoleChanged, UserID: userID, Role: role})
		if err != nil {
			return nil, err
		}
		ev := chat.MemberUpdatedEvent(conversationID, userID, actorID, role, entries[0].Seq)
		if err := insertOutbox(ctx, tx, chat.TraceContext{}, ev); err != nil {
			return nil, err
		}
		return append(systemEvents(entries), ev), nil
	})
	if err != nil {
		return chat.Member{}, err
	}
	return out, nil
}

// TransferOwnership makes userID (a member) the owner and the previous
// owner an admin: the owner only. A transfer repeated by the previous
// owner (the first answer was lost) to whom they made owner succeeds and
// writes nothing, while userID still owns the group by their transfer and
// they have stayed a member since (gaveOwnership).
func (s *Store) TransferOwnership(ctx context.Context, conversationID, actorID, userID int64) error {
	return s.changeTx(ctx, "transfer ownership", conversationID, func(tx pgx.Tx) ([]chat.Event, error) {
		_, actor, err := lockGroup(ctx, tx, conversationID, actorID, "have an owner")
		if err != nil {
			return nil, err
		}
		if actor.Role != chat.RoleOwner {
			done, err := gaveOwnership(ctx, tx, conversationID, actorID, userID)
			if err != nil || done {
				return nil, err
			}
			return nil, chat.Errorf(chat.CodeForbidden, "only the owner can transfer ownership")
		}
		if userID == actorID {
			return nil, chat.Errorf(chat.CodeInvalid, "you own the group already")
		}
		if _, ok, err := getMember(ctx, tx, conversationID, userID); err != nil {
			return nil, err
		} else if !ok {
			return nil, chat.Errorf(chat.CodeNotFound, "user %d is not a member of conversation %d", userID, conversationID)
		}
		// Both rows first, in key order: the update alone would lock them
		// in whatever order its plan scans them.
		if err := lockMembers(ctx, tx, conversationID, actorID, userID); err != nil {
			return nil, err
		}
		// The owner first: a group's owner rows are unique (migration
		// 0044), checked row by row, so one statement changing both
		// could promote before it demotes.
		if _, err := tx.Exec(ctx, `
			UPDATE conversation_member SET role = 'admin' WHERE conversation_id = $1 AND user_id = $2`, conversationID, actorID); err != nil {
			return nil, fmt.Errorf("transfer ownership: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE conversation_member SET role = 'owner' WHERE conversation_id = $1 AND user_id = $2`, conversationID, userID); err != nil {
			return nil, fmt.Errorf("transfer ownership: %w", err)
		}
		entries, err := appendSystem(ctx, tx, conversationID, actorID,
			chat.SystemEntry{Action: chat.SystemOwnerChanged, UserID: userID, Role: chat.RoleOwner})
		if err != nil {
			return nil, err
		}
		seq := entries[0].Seq
		evs := []chat.Event{chat.MemberUpdatedEvent(conversationID, userID, actorID, chat.RoleOwner, seq),
			chat.MemberUpdatedEvent(conversationID, actorID, actorID, chat.RoleAdmin, seq)}
		if err := insertOutbox(ctx, tx, chat.TraceContext{}, evs...); err != nil {
			return nil, err
		}
		return append(systemEvents(entries), evs...), nil
	})
}

// gaveOwnership says whether userID owns the group by actorID's transfer
// made in actorID's current membership: the owner.changed entry that made
// them owner, the latest about them, is actorID's and comes after
// actorID's join (join_seq, the last seq when they were added). A member
// who left and was added back is a new member who transferred nothing:
// neither a transfer before their leave nor the successor's owner.changed
// their leave wrote as theirs (an owner leaving) makes their transfer a
// retry.
func gaveOwnership(ctx context.Context, tx pgx.Tx, conversationID, actorID, userID int64) (bool, error) {
	target, ok, err := getMember(ctx, tx, conversationID, userID)
	if err != nil || !ok || target.Role != chat.RoleOwner {
		return false, err
	}
	var gave bool
	err = tx.QueryRow(ctx, `
		SELECT o.sender_id = $3 AND o.seq > (
			SELECT a.join_seq FROM conversation_member a WHERE a.conversation_id = $1 AND a.user_id = $3)
		FROM message o
		WHERE o.conversation_id = $1 AND o.kind = 'system'
		  AND o.body::jsonb @> jsonb_build_object('userId', $2::bigint)
		  AND o.body::jsonb->>'action' = $4
		ORDER BY o.seq DESC LIMIT 1`,
		conversationID, userID, actorID, string(chat.SystemOwnerChanged)).Scan(&gave)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read who made user %d owner: %w", userID, err)
	}
	return gave, nil
}

// membersPageSQL pages members by (role rank, joined_at, user_id), strictly
// after the cursor's row.
const membersPageSQL = `
SELECT ` + memberColumns + `, CASE role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END AS rank
FROM member_watermark
WHERE conversation_id = $1
  AND (CASE role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, joined_at, user_id) > ($2::int, $3::timestamptz, $4::bigint)
ORDER BY rank, joined_at, user_id
LIMIT $5`

// MembersPage pages a conversation's members for one of them: the owner,
// then admins, then members, each by join time, with roles, join times and
// watermarks (read watermarks as the viewer may see them).
func (s *Store) MembersPage(ctx context.Context, conversationID, userID int64, limit int, cursor string) (chat.MembersPage, error) {
	rank, at, after := -1, time.Unix(0, 0), int64(0)
	if cursor != "" {
		var err error
		if rank, at, after, err = decodeMembersCursor(conversationID, cursor); err != nil {
			return chat.MembersPage{}, err
		}
	}
	page := chat.MembersPage{Members: []chat.Member{}}
	err := s.runTx(ctx, "members", readOnly(), func(tx pgx.Tx) error {
		conv, err := memberConversation(ctx, tx, conversationID, userID)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, membersPageSQL, conversationID, rank, at, after, limit+1)
		if err != nil {
			return fmt.Errorf("read members: %w", err)
		}
		var ranks []int
		for rows.Next() {
			var m chat.Member
			var r int
			if err := rows.Scan(&m.UserID, &m.Role, &m.LastReadSeq, &m.LastDeliveredSeq, &m.JoinedAt, &r); err != nil {
				rows.Close()
				return fmt.Errorf("read members: %w", err)
			}
			page.Members = append(page.Members, m)
			ranks = append(ranks, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read members: %w", err)
		}
		if len(page.Members) > limit {
			page.Members = page.Members[:limit]
			last := page.Members[limit-1]
			page.NextCursor = encodeMembersCursor(conversationID, ranks[limit-1], last.JoinedAt, last.UserID)
		}
		conv.Members = page.Members
		return viewMembers(ctx, tx, &conv, userID)
	})
	if err != nil {
		return chat.MembersPage{}, err
	}
	return page, nil
}
