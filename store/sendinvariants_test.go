package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
)

// sent is one change a racing writer submitted and what it was answered.
type sent struct {
	c   chat.Change
	res chat.ChangeResult
	err error
}

// Writers race mixed changes into three groups through group commit:
// messages, replies, forwards, resends of one clientMsgId from two
// writers, edits and recalls of the same messages, reactions toward the
// 20-emoji limit, read marks, and a member removed while their sends are
// queued. Whatever the batches were, the stored data must tell the same
// story as the answers.
func TestRacingMixedChangesLeaveAStreamThatMatchesEveryAnswer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	var convs []int64
	seeds := map[int64][]int64{} // conversation → seqs of messages by user 1; the first 3 may be recalled
	for range 3 {
		g := mustGroup(t, st, 1, 2, 3, 4)
		convs = append(convs, g.ID)
		for i := range 6 {
			seeds[g.ID] = append(seeds[g.ID], mustSend(t, st, g.ID, 1, fmt.Sprint("seed ", i)).Seq)
		}
	}
	resendIDs := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	emojis := make([]string, 24)
	for i := range emojis {
		emojis[i] = string(rune(0x1F600 + i))
	}

	limited := seeds[convs[2]][5] // user 2 starts an emoji short of the limit on it
	for _, e := range emojis[:chat.MaxReactionsPerUser-1] {
		mustChange(t, st, react(convs[2], 2, limited, e, true))
	}

	var mu sync.Mutex
	var log []sent
	var marks []chat.Change // acked read marks: conv, user, seq in TargetSeq
	const writers, each = 8, 40
	errs := concurrently(writers+1, func(w int) error {
		if w == writers {
			// User 4 leaves the first group while writes are queued.
			return st.RemoveMember(ctx, convs[0], 1, 4)
		}
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		for i := range each {
			conv := convs[rng.IntN(len(convs))]
			user := int64(1 + rng.IntN(4))
			target := seeds[conv][rng.IntN(len(seeds[conv]))]
			c := chat.Change{Kind: chat.KindMessage, ConversationID: conv, UserID: user, ClientMsgID: uuid.NewString(),
				Body: fmt.Sprintf("w%d #%d", w, i)}
			switch rng.IntN(11) {
			case 0:
				c.ReplyTo = target
			case 1:
				from := convs[rng.IntN(len(convs))]
				c.Body, c.Forward = "", &chat.MessageRef{ConversationID: from, Seq: seeds[from][rng.IntN(len(seeds[from]))]}
			case 2: // the same clientMsgId from two writers
				c.ConversationID, c.UserID, c.ClientMsgID, c.Body = convs[1], 2, resendIDs[rng.IntN(len(resendIDs))], "resent"
			case 3:
				c = edit(conv, 1, target, fmt.Sprintf("edit w%d #%d", w, i))
			case 4:
				c = change(chat.KindRecall, conv, 1, seeds[conv][rng.IntN(3)])
			case 5, 6:
				c = react(conv, user, target, emojis[rng.IntN(len(emojis))], rng.IntN(3) > 0)
			case 8, 9: // toward the limit, on a message never recalled
				c = react(convs[2], 2, limited, emojis[rng.IntN(len(emojis))], rng.IntN(4) > 0)
			case 7:
				seq := int64(rng.IntN(8))
				if _, err := st.MarkRead(ctx, conv, user, seq); err == nil {
					mu.Lock()
					marks = append(marks, chat.Change{ConversationID: conv, UserID: user, TargetSeq: seq})
					mu.Unlock()
				}
				continue
			}
			res, err := st.Change(ctx, c)
			var ce *chat.Error
			if err != nil && (!errors.As(err, &ce) || ce.Code == chat.CodeUnavailable || ce.Code == chat.CodeInternal) {
				return fmt.Errorf("%s by %d in %d: %w", c.Kind, c.UserID, c.ConversationID, err)
			}
			mu.Lock()
			log = append(log, sent{c, res, err})
			mu.Unlock()
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkStreamMatchesAnswers(t, pool, log)
	checkStreamInvariants(t, pool, convs, marks)
}

// checkStreamMatchesAnswers holds each answer against the stored entries:
// an acked change is the entry at its seq, a refused or unchanged one
// wrote nothing under its clientMsgId, and the writers of one clientMsgId
// were answered one seq, one of them new.
func checkStreamMatchesAnswers(t *testing.T, pool *pgxpool.Pool, log []sent) {
	t.Helper()
	type key struct {
		conv int64
		id   string
	}
	seqOf, fresh := map[key]int64{}, map[key]int{}
	for _, s := range log {
		k := key{s.c.ConversationID, s.c.ClientMsgID}
		stored := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND client_msg_id = $2`, k.conv, k.id)
		if s.err != nil || s.res.Unchanged {
			if stored != 0 && s.c.Body != "resent" {
				t.Errorf("%s by %d in %d answered %v (unchanged %v), yet stored", s.c.Kind, s.c.UserID, k.conv, s.err, s.res.Unchanged)
			}
			continue
		}
		var id string
		var sender int64
		var kind string
		if err := pool.QueryRow(testCtx(t), `SELECT client_msg_id::text, sender_id, kind FROM message WHERE conversation_id = $1 AND seq = $2`,
			k.conv, s.res.Entry.Seq).Scan(&id, &sender, &kind); err != nil {
			t.Fatalf("%s by %d acked at %d:%d: %v", s.c.Kind, s.c.UserID, k.conv, s.res.Entry.Seq, err)
		}
		if id != k.id || sender != s.c.UserID || kind != string(s.c.Kind) {
			t.Errorf("%s by %d acked at %d:%d, which holds %s by %d (%s)", s.c.Kind, s.c.UserID, k.conv, s.res.Entry.Seq, kind, sender, id)
		}
		if seq, ok := seqOf[k]; ok && seq != s.res.Entry.Seq {
			t.Errorf("clientMsgId %s answered seq %d and %d", k.id, seq, s.res.Entry.Seq)
		}
		seqOf[k] = s.res.Entry.Seq
		if !s.res.Duplicate {
			fresh[k]++
		}
	}
	for k, n := range fresh {
		if n != 1 {
			t.Errorf("clientMsgId %s in %d answered new %d times", k.id, k.conv, n)
		}
	}
}

// checkStreamInvariants checks what the stored rows must say of
// themselves whatever the writers did.
func checkStreamInvariants(t *testing.T, pool *pgxpool.Pool, convs []int64, marks []chat.Change) {
	t.Helper()
	for _, q := range []struct{ what, sql string }{
		{"conversations whose seqs are not 1..last_seq", `SELECT count(*) FROM conversation c WHERE c.id = ANY ($1) AND
			(c.last_seq, c.last_seq) <> (SELECT count(*), COALESCE(max(m.seq), 0) FROM message m WHERE m.conversation_id = c.id)`},
		{"conversations whose message count, last message or its time is off", `SELECT count(*) FROM conversation c WHERE c.id = ANY ($1) AND
			NOT EXISTS (SELECT 1 FROM (SELECT count(*) AS n, max(m.seq) AS s, (array_agg(m.created_at ORDER BY m.seq DESC))[1] AS a
			FROM message m WHERE m.conversation_id = c.id AND m.kind = 'message') x
			WHERE x.n = c.message_count AND x.s = c.last_message_seq AND x.a = c.last_message_at)`},
		{"entries older than the entry before them", `SELECT count(*) FROM message a JOIN message b
			ON b.conversation_id = a.conversation_id AND b.seq = a.seq + 1 WHERE a.conversation_id = ANY ($1) AND b.created_at < a.created_at`},
		{"edits after the recall of their message", `SELECT count(*) FROM message e JOIN message r ON r.conversation_id = e.conversation_id
			AND r.kind = 'recall' AND r.target_seq = e.target_seq WHERE e.conversation_id = ANY ($1) AND e.kind = 'edit' AND e.seq > r.seq`},
		{"messages whose recall and recall entries disagree", `SELECT count(*) FROM message m WHERE m.conversation_id = ANY ($1) AND m.kind = 'message'
			AND (m.recalled_at IS NOT NULL) <> EXISTS (SELECT 1 FROM message r WHERE r.conversation_id = m.conversation_id
			AND r.kind = 'recall' AND r.target_seq = m.seq)`},
		{"recall entries beyond the first of a message", `SELECT count(*) - count(DISTINCT (conversation_id, target_seq)) FROM message
			WHERE conversation_id = ANY ($1) AND kind = 'recall'`},
		{"reactions that are not their entries folded", `SELECT count(*) FROM (
			SELECT DISTINCT ON (e.conversation_id, e.target_seq, e.sender_id, e.emoji) e.conversation_id, e.target_seq, e.sender_id, e.emoji, e.reaction_on
			FROM message e WHERE e.conversation_id = ANY ($1) AND e.kind = 'reaction'
			ORDER BY e.conversation_id, e.target_seq, e.sender_id, e.emoji, e.seq DESC) f
			JOIN message t ON t.conversation_id = f.conversation_id AND t.seq = f.target_seq
			WHERE (f.reaction_on AND t.recalled_at IS NULL) <> EXISTS (SELECT 1 FROM reaction x WHERE x.conversation_id = f.conversation_id
			AND x.seq = f.target_seq AND x.user_id = f.sender_id AND x.emoji = f.emoji)`},
		{"reactions without an entry setting them", `SELECT count(*) FROM reaction x WHERE x.conversation_id = ANY ($1) AND NOT EXISTS (
			SELECT 1 FROM message e WHERE e.conversation_id = x.conversation_id AND e.kind = 'reaction' AND e.target_seq = x.seq
			AND e.sender_id = x.user_id AND e.emoji = x.emoji AND e.reaction_on)`},
		{"last reaction counts that are not the reactions", `SELECT count(*) FROM (
			SELECT DISTINCT ON (e.conversation_id, e.target_seq, e.emoji) e.conversation_id, e.target_seq, e.emoji, e.reaction_count
			FROM message e WHERE e.conversation_id = ANY ($1) AND e.kind = 'reaction'
			ORDER BY e.conversation_id, e.target_seq, e.emoji, e.seq DESC) f
			JOIN message t ON t.conversation_id = f.conversation_id AND t.seq = f.target_seq AND t.recalled_at IS NULL
			WHERE f.reaction_count <> (SELECT count(*) FROM reaction x WHERE x.conversation_id = f.conversation_id
			AND x.seq = f.target_seq AND x.emoji = f.emoji)`},
		{"users with more than 20 emojis on a message", `SELECT count(*) FROM (SELECT 1 FROM reaction WHERE conversation_id = ANY ($1)
			GROUP BY conversation_id, seq, user_id HAVING count(*) > 20) x`},
		{"messages with more than 20 distinct emojis", `SELECT count(*) FROM (SELECT 1 FROM reaction WHERE conversation_id = ANY ($1)
			GROUP BY conversation_id, seq HAVING count(DISTINCT emoji) > 20) x`},
		{"watermarks past last_seq or behind the member's own entries", `SELECT count(*) FROM conversation_member m JOIN conversation c
			ON c.id = m.conversation_id WHERE c.id = ANY ($1) AND (m.last_read_seq > c.last_seq OR m.last_read_seq < COALESCE((
			SELECT max(e.seq) FROM message e WHERE e.conversation_id = c.id AND e.sender_id = m.user_id AND e.kind <> 'system'), 0))`},
		{"entries without exactly one outbox row", `SELECT count(*) FROM message m WHERE m.conversation_id = ANY ($1) AND
			(SELECT count(*) FROM outbox o WHERE o.conversation_id = m.conversation_id AND o.seq = m.seq) <> 1`},
		{"outbox rows without an entry", `SELECT count(*) FROM outbox o WHERE o.conversation_id = ANY ($1) AND NOT EXISTS (
			SELECT 1 FROM message m WHERE m.conversation_id = o.conversation_id AND m.seq = o.seq)`},
	} {
		if n := queryInt(t, pool, q.sql, convs); n != 0 {
			t.Errorf("%d %s", n, q.what)
		}
	}
	for _, m := range marks {
		if n := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND user_id = $2 AND last_read_seq < $3`,
			m.ConversationID, m.UserID, m.TargetSeq); n != 0 {
			t.Errorf("%d's watermark in %d went back below %d", m.UserID, m.ConversationID, m.TargetSeq)
		}
	}
}
