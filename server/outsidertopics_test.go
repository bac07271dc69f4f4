package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// dbDigest is a digest of every table of the database: equal digests,
// nothing stored. A table in custom is digested by its query instead, ""
// leaving it out: what connections and background work change on their
// own (sessions and their cursors, the relay emptying the outbox) would
// change a whole-table digest whatever a request did.
func dbDigest(t *testing.T, pool *pgxpool.Pool, custom map[string]string) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range tables {
		q, ok := custom[n]
		if !ok {
			q = `SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM "` + n + `" t`
		} else if q == "" {
			continue
		}
		var sum string
		if err := pool.QueryRow(ctx, q).Scan(&sum); err != nil {
			t.Fatalf("digest %s: %v", n, err)
		}
		out[n] = sum
	}
	return out
}

// TestEveryConversationTopicRefusesAnOutsider: for every kind of
// conversation topic the server parses (hooks.ConversationActions: a new
// kind not classified here fails the test), a publish by a user who never
// was a member, one who was removed and one who left is refused with
// PUBACK 0x87 and the user property code not_member (v5), or the PUBACK
// and an error event with that code (v3.1.1); where the block forbids it,
// a publish by the blocked member of a direct conversation is refused
// alike with code blocked, and an edit, recall or reaction by a member
// added later, of a message from before their join, with not_found. None
// stores anything or reaches a member. A
// SUBSCRIBE by them to the conversation's topics or to a member's events
// is refused (SUBACK 0x87 / 0x80).
func TestEveryConversationTopicRefusesAnOutsider(t *testing.T) {
	const (
		owner, member, stranger, removed, leaver = 1, 2, 3, 5, 6
		blocker, blocked                         = 10, 11
		late                                     = 30
	)
	srv := startNode(t, pgtest.NewDB(t), nil)
	ctx := context.Background()
	g := mustGroup(t, ctx, srv, owner, "secret group", []int64{member, removed, leaver}).ID
	send := func(user, conv int64, id, body string) int64 {
		t.Helper()
		var rep struct{ Seq int64 }
		if st := api(t, srv, user, "POST", fmt.Sprintf("/v1/conversations/%d/messages", conv),
			map[string]string{"clientMsgId": id, "body": body}, &rep); st != http.StatusCreated {
			t.Fatalf("send by %d: %d", user, st)
		}
		return rep.Seq
	}
	first := send(owner, g, newID(), "secret one")
	removedSeq := send(removed, g, newID(), "mine")
	leaverSeq := send(leaver, g, newID(), "bye")
	if st := api(t, srv, owner, "DELETE", fmt.Sprintf("/v1/conversations/%d/members/%d", g, removed), nil, nil); st != http.StatusNoContent {
		t.Fatalf("remove: %d", st)
	}
	if st := api(t, srv, leaver, "DELETE", fmt.Sprintf("/v1/conversations/%d/members/%d", g, leaver), nil, nil); st != http.StatusNoContent {
		t.Fatalf("leave: %d", st)
	}
	// late joins after it all; g's history is "joined": what came before
	// does not exist for them.
	if st := api(t, srv, owner, "POST", fmt.Sprintf("/v1/conversations/%d/members", g), map[string]int64{"userId": late}, nil); st != http.StatusCreated {
		t.Fatalf("add late: %d", st)
	}
	dir := mustDirect(t, ctx, srv, blocker, blocked).ID
	send(blocker, dir, newID(), "secret direct")
	blockedSeq := send(blocked, dir, newID(), "hi")
	if st := api(t, srv, blocker, "PUT", fmt.Sprintf("/v1/me/blocks/%d", blocked), nil, nil); st != http.StatusNoContent {
		t.Fatalf("block: %d", st)
	}

	// payloads builds a publish of each kind: own is the seq of a message
	// of the publisher's (for an edit or recall), other's one of someone
	// else's (for a reaction or read). blockable says whether the block
	// of a direct conversation forbids it (docs/protocol.md: a recall is
	// still allowed, and reading was never writing into it).
	type kind struct {
		payload   func(own, others int64) []byte
		blockable bool
	}
	kinds := map[string]kind{
		"msg": {func(_, _ int64) []byte { return testnode.SendPayload(newID(), "x") }, true},
		"edit": {func(own, _ int64) []byte {
			return []byte(fmt.Sprintf(`{"clientMsgId":%q,"seq":%d,"body":"y"}`, newID(), own))
		}, true},
		"recall": {func(own, _ int64) []byte { return []byte(fmt.Sprintf(`{"clientMsgId":%q,"seq":%d}`, newID(), own)) }, false},
		"react": {func(_, others int64) []byte {
			return []byte(fmt.Sprintf(`{"clientMsgId":%q,"seq":%d,"emoji":"👍","on":true}`, newID(), others))
		}, true},
		"read":   {func(_, others int64) []byte { return []byte(fmt.Sprintf(`{"seq":%d}`, others)) }, false},
		"typing": {func(_, _ int64) []byte { return []byte(`{}`) }, true},
	}
	actions := hooks.ConversationActions()
	for _, a := range actions {
		if _, ok := kinds[a]; !ok {
			t.Errorf("conversation topic chat/v1/conv/{cid}/%s is not classified: add its outsider publish to this test", a)
		}
	}
	if len(kinds) != len(actions) {
		t.Errorf("the test classifies %d topic kinds, the server parses %v", len(kinds), actions)
	}

	// The members who would see what got through read up to a marker
	// message first, and after the knocks up to a second one: anything
	// of the conversation between is a leak.
	watchers := map[int64]*mqtttest.Client{
		member:  rawClient(t, srv.MQTTAddr(), member, "watch-member", 5, true),
		blocker: rawClient(t, srv.MQTTAddr(), blocker, "watch-blocker", 5, true),
	}
	marker := func(what string) {
		t.Helper()
		for user, conv := range map[int64]int64{member: g, blocker: dir} {
			author := int64(owner)
			if conv == dir {
				author = blocker
			}
			seq := send(author, conv, newID(), what)
			c := watchers[user]
			nextPublish(t, c, what+" of conversation "+fmt.Sprint(conv), 15*time.Second, func(pk packets.Packet) bool {
				var ev event
				if err := json.Unmarshal(pk.Payload, &ev); err != nil {
					t.Fatalf("bad event %q: %v", pk.Payload, err)
				}
				if ev.Type == "message.new" && ev.ConversationID == conv && ev.Seq == seq {
					return true
				}
				if what == "after" && ev.ConversationID == conv {
					t.Errorf("user %d got %s from an outsider's publish", user, pk.Payload)
				}
				return false
			})
			// The watcher's delivered watermark, saved in the background
			// (with its delivery.updated events), must be saved before the
			// knocks, or it would be what changed the tables. The blocker
			// sent the direct marker: their own message moves no delivered
			// watermark.
			if user == member {
				testkit.WaitFor(t, 15*time.Second, "the member's delivered watermark at the marker", func() bool {
					var d int64
					_ = srv.Pool.QueryRow(ctx, `SELECT delivered_seq FROM member_delivery WHERE conversation_id = $1 AND user_id = $2`, conv, user).Scan(&d)
					return d >= seq
				})
			}
		}
	}
	marker("before")

	type outsider struct {
		who         string
		user        int64
		conv        int64
		own, others int64
		code        string
		blockOnly   bool
		only        map[string]bool // the kinds it is refused (nil: all)
	}
	outsiders := []outsider{
		{"never a member", stranger, g, first, first, "not_member", false, nil},
		{"removed", removed, g, removedSeq, first, "not_member", false, nil},
		{"left", leaver, g, leaverSeq, first, "not_member", false, nil},
		{"blocked", blocked, dir, blockedSeq, 1, "blocked", true, nil},
		{"joined later, on what came before", late, g, first, first, "not_found", false, map[string]bool{"edit": true, "recall": true, "react": true}},
	}
	// An event stored and relayed at once leaves the outbox's sequence
	// moved; the watchers' delivery cursors move as they take the
	// markers, the outsiders' must not. What follows connections and the
	// markers in the background is left out.
	custom := map[string]string{
		"outbox":          `SELECT last_value::text FROM outbox_id_seq`,
		"member_delivery": fmt.Sprintf(`SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM member_delivery t WHERE user_id NOT IN (%d, %d)`, member, blocker),
		"chat_session":    "",
		"session_cursor":  "",
		// The push decider moves it push_delay after the markers, for
		// the members with no session that took them.
		"push_cursor": "",
		// The node's heartbeat moves every few seconds; which nodes there
		// are, and which life of each, must not.
		"chat_node": `SELECT coalesce(md5(string_agg(node_id || '/' || incarnation, ',' ORDER BY node_id)), '') FROM chat_node`,
	}
	for _, o := range outsiders {
		for _, v := range []byte{5, 4} {
			c := rawClient(t, srv.MQTTAddr(), o.user, fmt.Sprintf("outsider-%d-v%d", o.user, v), v, true)
			for _, a := range actions {
				k, ok := kinds[a]
				if !ok || o.blockOnly && !k.blockable || o.only != nil && !o.only[a] {
					continue
				}
				topic := fmt.Sprintf("chat/v1/conv/%d/%s", o.conv, a)
				name := fmt.Sprintf("v%d publish to %s by %s", v, topic, o.who)
				before := dbDigest(t, srv.Pool, custom)
				ack, err := c.Publish(topic, 1, k.payload(o.own, o.others))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if v == 5 {
					if ack.ReasonCode != 0x87 || userProp(ack.Properties.User, "code") != o.code {
						t.Errorf("%s: PUBACK 0x%02x code %q, want 0x87 %q", name, ack.ReasonCode, userProp(ack.Properties.User, "code"), o.code)
					}
					if strings.Contains(strings.ToLower(ack.Properties.ReasonString), "secret") {
						t.Errorf("%s: the reason string tells the conversation's text: %s", name, ack.Properties.ReasonString)
					}
				} else {
					if ack.ReasonCode != 0 {
						t.Errorf("%s: PUBACK 0x%02x, want 0x00 (ack and drop)", name, ack.ReasonCode)
					}
					if ev := nextEvent(t, c, "error", 10*time.Second); ev.Code != o.code || ev.ConversationID != o.conv && ev.ConversationID != 0 {
						t.Errorf("%s: error event %+v, want code %q", name, ev, o.code)
					}
				}
				after := dbDigest(t, srv.Pool, custom)
				for n, s := range after {
					if before[n] != s {
						t.Errorf("%s: table %s changed", name, n)
					}
				}
			}

			// Subscriptions to the conversation and to a member's tree.
			filters := []string{
				fmt.Sprintf("chat/v1/conv/%d/#", o.conv), "chat/v1/conv/+/msg", "chat/v1/conv/#",
				testnode.EventsTopic(member), testnode.EventsTopic(blocker), "chat/v1/user/+/events", "chat/v1/user/#", "chat/v1/#", "#",
			}
			for _, a := range actions {
				filters = append(filters, fmt.Sprintf("chat/v1/conv/%d/%s", o.conv, a))
			}
			want := byte(0x87)
			if v == 4 {
				want = 0x80
			}
			for _, f := range filters {
				codes, err := c.Subscribe(f)
				if err != nil || len(codes) != 1 || codes[0] != want {
					t.Errorf("v%d subscribe %q by %s: %v %v, want 0x%02x", v, f, o.who, codes, err, want)
				}
			}
		}
	}
	marker("after")
}
