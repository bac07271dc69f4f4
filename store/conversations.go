package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

const conversationColumns = `id, type, title, last_seq, last_message_at, created_at, about, avatar_url, history_visible`

func scanConversation(row pgx.Row) (chat.Conversation, error) {
	var c chat.Conversation
	err := row.Scan(&c.ID, &c.Type, &c.Title, &c.LastSeq, &c.LastMessageAt, &c.CreatedAt, &c.About, &c.Avatar, &c.HistoryVisible)
	if c.Type == chat.Direct {
		c.HistoryVisible = ""
	}
	return c, err
}

// lockConversation takes the conversation row lock that serialises sends and
// membership changes. Anything read after it must be read by a later
// statement, which in READ COMMITTED sees the previous holder's commit.
func lockConversation(ctx context.Context, tx pgx.Tx, id int64) (chat.Conversation, error) {
	c, err := scanConversation(tx.QueryRow(ctx,
		`SELECT `+conversationColumns+` FROM conversation WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, errNoConversation(id)
	}
	if err != nil {
		return c, fmt.Errorf("lock conversation: %w", err)
	}
	return c, nil
}

// memberConversation reads the conversation for a member of it: not_found
// when it does not exist, not_member when userID is not in it. Its
// lastMessageAt is the member's (lastMessageAtSQL).
func memberConversation(ctx context.Context, tx pgx.Tx, id, userID int64) (chat.Conversation, error) {
	var (
		c      chat.Conversation
		member bool
	)
	err := tx.QueryRow(ctx, `
		SELECT c.id, c.type, c.title, c.last_seq, `+lastMessageAtSQL+`, c.created_at, c.about, c.avatar_url, c.history_visible,
		       m.user_id IS NOT NULL, COALESCE(m.join_seq, 0)
		FROM conversation c
		LEFT JOIN conversation_member m ON m.conversation_id = c.id AND m.user_id = $2
		CROSS JOIN LATERAL (SELECT `+floorSQL+` AS floor) f
		WHERE c.id = $1`, id, userID).
		Scan(&c.ID, &c.Type, &c.Title, &c.LastSeq, &c.LastMessageAt, &c.CreatedAt, &c.About, &c.Avatar, &c.HistoryVisible, &member, &c.JoinSeq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return c, errNoConversation(id)
	case err != nil:
		return c, fmt.Errorf("read conversation: %w", err)
	case !member:
		return c, errNotMember(id)
	}
	if c.Type == chat.Direct {
		c.HistoryVisible = ""
	}
	return c, nil
}

// memberColumns are read from member_watermark (migration 0009), whose
// last_delivered_seq is the member's delivered watermark. A member row just
// inserted may return them itself: nothing has been delivered past its join.
const memberColumns = `user_id, role, last_read_seq, last_delivered_seq, joined_at`

func scanMember(row pgx.Row) (chat.Member, error) {
	var m chat.Member
	err := row.Scan(&m.UserID, &m.Role, &m.LastReadSeq, &m.LastDeliveredSeq, &m.JoinedAt)
	return m, err
}

// getMember returns the member row, ok=false when userID is not a member.
func getMember(ctx context.Context, tx pgx.Tx, convID, userID int64) (chat.Member, bool, error) {
	m, err := scanMember(tx.QueryRow(ctx,
		`SELECT `+memberColumns+` FROM member_watermark WHERE conversation_id = $1 AND user_id = $2`,
		convID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read member %d: %w", userID, err)
	}
	return m, true, nil
}

func loadMembers(ctx context.Context, tx pgx.Tx, convID int64) ([]chat.Member, error) {
	rows, err := tx.Query(ctx,
		`SELECT `+memberColumns+` FROM member_watermark WHERE conversation_id = $1 ORDER BY user_id`, convID)
	if err != nil {
		return nil, fmt.Errorf("read members: %w", err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chat.Member, error) { return scanMember(r) })
	if err != nil {
		return nil, fmt.Errorf("read members: %w", err)
	}
	return ms, nil
}

// CreateGroup creates a GROUP with g.CreatorID as owner and g.Members as
// plain members, all starting at seq 0; a member who blocked the creator
// refuses it (refuseBlockers). With a key (chat.GroupRequest), a create
// the creator made with it before answers that group as the creator sees
// it now (created false, nothing written), a concurrent one included: of
// two racing with one key, the second waits for the first's key row and
// answers its group (createKeyed). The key asking for another title or
// other members is a conflict.
func (s *Store) CreateGroup(ctx context.Context, g chat.GroupRequest) (chat.Conversation, bool, error) {
	if err := chat.ValidateID("creator id", g.CreatorID); err != nil {
		return chat.Conversation{}, false, err
	}
	var key *string
	if g.Key != "" {
		k, err := chat.ValidateClientMsgID(g.Key)
		if err != nil {
			return chat.Conversation{}, false, err
		}
		key = &k
	}
	// The Service de-duplicates too; doing it here keeps a direct caller
	// from tripping the primary key.
	ids := []int64{g.CreatorID}
	roles := []string{string(chat.RoleOwner)}
	seen := map[int64]bool{g.CreatorID: true}
	for _, m := range g.Members {
		if err := chat.ValidateID("member id", m); err != nil {
			return chat.Conversation{}, false, err
		}
		if !seen[m] {
			seen[m] = true
			ids = append(ids, m)
			roles = append(roles, string(chat.RoleMember))
		}
	}
	if len(ids) > s.limits.MaxMembers {
		return chat.Conversation{}, false, chat.Errorf(chat.CodeMemberCap, "a group has at most %d members", s.limits.MaxMembers)
	}
	// Never nil, which pgx writes as NULL: a group of its creator alone
	// records '{}'.
	others := append(make([]int64, 0, len(ids)-1), ids[1:]...)
	slices.Sort(others)
	asked := groupAsked{title: g.Title, members: others}
	var (
		conv    chat.Conversation
		created bool
	)
	err := s.writeTx(ctx, "create group", func(tx pgx.Tx) ([]chat.Event, error) {
		if key != nil {
			id, found, err := keyedGroup(ctx, tx, g.CreatorID, *key, asked)
			if err != nil {
				return nil, err
			}
			if found {
				conv, err = conversationFor(ctx, tx, id, g.CreatorID)
				return nil, err
			}
		}
		if err := refuseBlockers(ctx, tx, g.CreatorID, ids[1:]); err != nil {
			return nil, err
		}
		made, err := createKeyed(ctx, tx, g.CreatorID, key, asked)
		if err != nil {
			return nil, err
		}
		if made.keyed != 0 {
			conv, err = conversationFor(ctx, tx, made.keyed, g.CreatorID)
			return nil, err
		}
		conv = made.conv
		if _, err := tx.Exec(ctx, `
			INSERT INTO conversation_member (conversation_id, user_id, role)
			SELECT $1, u, r FROM unnest($2::bigint[], $3::text[]) AS t(u, r)`,
			conv.ID, ids, roles); err != nil {
			return nil, fmt.Errorf("insert members: %w", err)
		}
		if conv.Members, err = loadMembers(ctx, tx, conv.ID); err != nil {
			return nil, err
		}
		created = true
		ev := chat.ConversationCreatedEvent(conv, g.CreatorID)
		if len(ids) <= maxPresenceStarted {
			if err := lockSharing(ctx, tx, conv.ID, ids, s.largeGroup); err != nil {
				return nil, err
			}
			if ev.PresenceShown, err = presenceStarted(ctx, tx, conv.ID, ids, s.largeGroup); err != nil {
				return nil, err
			}
		}
		return []chat.Event{ev}, nil
	})
	if err != nil {
		return chat.Conversation{}, false, err
	}
	return conv, created, nil
}

// groupAsked is what a keyed create asked for: the title and the other
// members, ascending.
type groupAsked struct {
	title   string
	members []int64
}

// keyedGroup returns the group creatorID made with key before (found
// false: none), refusing the key reused for another title or members.
func keyedGroup(ctx context.Context, tx pgx.Tx, creatorID int64, key string, asked groupAsked) (id int64, found bool, err error) {
	var was groupAsked
	err = tx.QueryRow(ctx, `SELECT conversation_id, title, members FROM group_create WHERE creator_id = $1 AND create_key = $2`,
		creatorID, key).Scan(&id, &was.title, &was.members)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the group of key %s: %w", key, err)
	}
	if was.title != asked.title || !slices.Equal(was.members, asked.members) {
		return 0, false, chat.Errorf(chat.CodeConflict,
			"key %s made group %d with another title or other members; use a new key for another group", key, id)
	}
	return id, true, nil
}

// groupMade is createKeyed's outcome: the group it inserted (conv), or
// the id of the one a concurrent create made with the same key (keyed;
// conv is then zero).
type groupMade struct {
	conv  chat.Conversation
	keyed int64
}

// createKeyed inserts the group's conversation and, with a key, claims
// the key for it (claimKey): of concurrent creates with one key, the
// others answer the first's group.
func createKeyed(ctx context.Context, tx pgx.Tx, creatorID int64, key *string, asked groupAsked) (groupMade, error) {
	if key == nil {
		conv, err := insertGroup(ctx, tx, asked.title)
		return groupMade{conv: conv}, err
	}
	var made groupMade
	_, err := claimKey(ctx, tx, func(sp pgx.Tx) (bool, error) {
		conv, err := insertGroup(ctx, sp, asked.title)
		if err != nil {
			return false, err
		}
		tag, err := sp.Exec(ctx, `
			INSERT INTO group_create (creator_id, create_key, conversation_id, title, members) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (creator_id, create_key) DO NOTHING`,
			creatorID, *key, conv.ID, asked.title, asked.members)
		if err != nil {
			return false, fmt.Errorf("claim key %s: %w", *key, err)
		}
		if tag.RowsAffected() == 0 {
			return false, nil
		}
		made.conv = conv
		return true, nil
	}, func(tx pgx.Tx) error {
		id, found, err := keyedGroup(ctx, tx, creatorID, *key, asked)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("the group of key %s vanished", *key)
		}
		made.keyed = id
		return nil
	})
	if err != nil {
		return groupMade{}, err
	}
	return made, nil
}

func insertGroup(ctx context.Context, tx pgx.Tx, title string) (chat.Conversation, error) {
	conv, err := scanConversation(tx.QueryRow(ctx,
		`INSERT INTO conversation (type, title) VALUES ($1, $2) RETURNING `+conversationColumns, chat.Group, title))
	if err != nil {
		return conv, fmt.Errorf("insert conversation: %w", err)
	}
	return conv, nil
}

// OpenDirect returns the pair's DIRECT conversation, creating it on first
// use. Both users are plain members: a direct conversation has nobody to
// manage, and AddMember/RemoveMember refuse DIRECT anyway.
func (s *Store) OpenDirect(ctx context.Context, userID, peerID int64) (chat.Conversation, bool, error) {
	if err := chat.ValidateID("user id", userID); err != nil {
		return chat.Conversation{}, false, err
	}
	if err := chat.ValidateID("peer id", peerID); err != nil {
		return chat.Conversation{}, false, err
	}
	if userID == peerID {
		return chat.Conversation{}, false, chat.Errorf(chat.CodeInvalid, "a direct conversation needs two different users")
	}
	low, high := min(userID, peerID), max(userID, peerID)
	var (
		conv    chat.Conversation
		created bool
	)
	err := s.writeTx(ctx, "open direct", func(tx pgx.Tx) ([]chat.Event, error) {
		if err := lockPairs(ctx, tx, low, high); err != nil {
			return nil, err
		}
		if err := refuseBlocked(ctx, tx, peerID, userID); err != nil {
			return nil, err
		}
		id, found, err := directPair(ctx, tx, low, high)
		if err != nil {
			return nil, err
		}
		if !found {
			if id, created, err = createDirect(ctx, tx, low, high); err != nil {
				return nil, err
			}
		}
		if conv, err = scanConversation(tx.QueryRow(ctx,
			`SELECT `+conversationColumns+` FROM conversation WHERE id = $1`, id)); err != nil {
			return nil, fmt.Errorf("read conversation %d: %w", id, err)
		}
		if conv.Members, err = loadMembers(ctx, tx, id); err != nil {
			return nil, err
		}
		if err := viewMembers(ctx, tx, &conv, userID); err != nil {
			return nil, err
		}
		if created {
			ev := chat.ConversationCreatedEvent(conv, userID)
			if err := lockSharing(ctx, tx, id, []int64{low, high}, s.largeGroup); err != nil {
				return nil, err
			}
			if ev.PresenceShown, err = presenceStarted(ctx, tx, id, []int64{low, high}, s.largeGroup); err != nil {
				return nil, err
			}
			return []chat.Event{ev}, nil
		}
		return nil, nil
	})
	if err != nil {
		return chat.Conversation{}, false, err
	}
	return conv, created, nil
}

func directPair(ctx context.Context, tx pgx.Tx, low, high int64) (id int64, found bool, err error) {
	err = tx.QueryRow(ctx,
		`SELECT conversation_id FROM direct_pair WHERE user_low = $1 AND user_high = $2`, low, high).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read direct pair: %w", err)
	}
	return id, true, nil
}

// createDirect inserts the conversation and claims the pair for it
// (claimKey); of concurrent opens of one pair, the others answer the
// first's conversation.
func createDirect(ctx context.Context, tx pgx.Tx, low, high int64) (id int64, created bool, err error) {
	won, err := claimKey(ctx, tx, func(sp pgx.Tx) (bool, error) {
		if err := sp.QueryRow(ctx,
			`INSERT INTO conversation (type) VALUES ($1) RETURNING id`, chat.Direct).Scan(&id); err != nil {
			return false, fmt.Errorf("insert conversation: %w", err)
		}
		tag, err := sp.Exec(ctx, `
			INSERT INTO direct_pair (user_low, user_high, conversation_id) VALUES ($1, $2, $3)
			ON CONFLICT (user_low, user_high) DO NOTHING`, low, high, id)
		if err != nil {
			return false, fmt.Errorf("claim direct pair: %w", err)
		}
		return tag.RowsAffected() == 1, nil
	}, func(tx pgx.Tx) error {
		first, found, err := directPair(ctx, tx, low, high)
		if err != nil {
			return err
		}
		if !found {
			// The conflicting row vanished: only a manual delete does that.
			return fmt.Errorf("direct pair (%d, %d) conflicted but is not visible", low, high)
		}
		id = first
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	if !won {
		return id, false, nil
	}
	// Each member row says whether the other one blocked them
	// (peer_blocked, what the send function reads); the caller holds the
	// pair's lock, so no block of the pair changes meanwhile.
	if _, err := tx.Exec(ctx, `
		INSERT INTO conversation_member (conversation_id, user_id, role, peer_blocked)
		VALUES ($1, $2, 'member', EXISTS (SELECT 1 FROM user_block WHERE blocker_id = $3 AND blocked_id = $2)),
		       ($1, $3, 'member', EXISTS (SELECT 1 FROM user_block WHERE blocker_id = $2 AND blocked_id = $3))`, id, low, high); err != nil {
		return 0, false, fmt.Errorf("insert members: %w", err)
	}
	return id, true, nil
}

// GetConversation returns the conversation and its members, members only.
func (s *Store) GetConversation(ctx context.Context, conversationID, userID int64) (chat.Conversation, error) {
	var conv chat.Conversation
	err := s.runTx(ctx, "get conversation", readOnly(), func(tx pgx.Tx) error {
		var err error
		conv, err = conversationFor(ctx, tx, conversationID, userID)
		return err
	})
	if err != nil {
		return chat.Conversation{}, err
	}
	return conv, nil
}

// conversationFor reads a conversation with its members as userID, a
// member, sees it (memberConversation, viewMembers).
func conversationFor(ctx context.Context, tx pgx.Tx, conversationID, userID int64) (chat.Conversation, error) {
	conv, err := memberConversation(ctx, tx, conversationID, userID)
	if err != nil {
		return conv, err
	}
	if conv.Members, err = loadMembers(ctx, tx, conversationID); err != nil {
		return conv, err
	}
	return conv, viewMembers(ctx, tx, &conv, userID)
}

// AddMember and RemoveMember are in groups.go, with the other changes of
// a group's membership and settings.

// Members lists the user ids of a conversation, ascending; empty for an
// unknown conversation.
func (s *Store) Members(ctx context.Context, conversationID int64) ([]int64, error) {
	return members(ctx, s.pool, conversationID)
}

func members(ctx context.Context, pool *pgxpool.Pool, conversationID int64) ([]int64, error) {
	rows, err := pool.Query(ctx,
		`SELECT user_id FROM conversation_member WHERE conversation_id = $1 ORDER BY user_id`, conversationID)
	if err != nil {
		return nil, classify("members", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify("members", err)
	}
	if ids == nil {
		ids = []int64{}
	}
	return ids, nil
}

// IsMember reports whether userID is a member of the conversation.
func (s *Store) IsMember(ctx context.Context, conversationID, userID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM conversation_member WHERE conversation_id = $1 AND user_id = $2)`,
		conversationID, userID).Scan(&ok)
	if err != nil {
		return false, classify("is member", err)
	}
	return ok, nil
}

// Typing publishes userID's typing event to the conversation's members if
// userID is one, and not the blocked member of a direct conversation
// (peer_blocked: blocked, as for a message). Nothing is stored: the
// indicator matters only now. The event's Seq is the conversation's
// last_seq as the check saw it (chat.Event).
func (s *Store) Typing(ctx context.Context, conversationID, userID int64) error {
	var member, blocked bool
	var lastSeq int64
	err := s.pool.QueryRow(ctx, `
		SELECT true, m.peer_blocked, c.last_seq
		FROM conversation_member m JOIN conversation c ON c.id = m.conversation_id
		WHERE m.conversation_id = $1 AND m.user_id = $2`,
		conversationID, userID).Scan(&member, &blocked, &lastSeq)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return classify("typing", err)
	}
	if !member {
		return errNotMember(conversationID)
	}
	if blocked {
		return chat.Errorf(chat.CodeBlocked, "the other member of conversation %d does not accept your messages", conversationID)
	}
	s.publish(chat.Event{Type: chat.EventTyping, ConversationID: conversationID, UserID: userID, Seq: lastSeq})
	return nil
}
