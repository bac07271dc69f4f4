package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/server"
)

// ownedEntry is an entry event as the removed member's phone receives it,
// with the content a large group's live events leave out.
type ownedEntry struct {
	Type           string  `json:"type"`
	ConversationID int64   `json:"conversationId"`
	Seq            int64   `json:"seq"`
	Body           *string `json:"body"`
	ClientMsgID    string  `json:"clientMsgId"`
	Emoji          string  `json:"emoji"`
	On             *bool   `json:"on"`
}

// A member removed from a large group (over CHAT_LARGE_GROUP members,
// whose live events carry no body) while their persistent session was
// offline gets, on reconnect, every entry up to the removal whole: a
// message with its body and clientMsgId, a reaction with its emoji.
// History refuses them now (not_member), so the event is all they get.
// Nothing after the removal comes. Added back meanwhile, what follows the
// new join is a member's again: slim, its body read through history.
func TestARemovedMemberOfALargeGroupGetsWhatTheyWereOwedWithItsBodyOnReconnect(t *testing.T) {
	t.Parallel()
	for _, readded := range []bool{false, true} {
		t.Run(fmt.Sprint("added back ", readded), func(t *testing.T) {
			srv := startNode(t, pgtest.NewDB(t), map[string]string{"CHAT_LARGE_GROUP": "2"})
			ctx := context.Background()
			// Four members, three after the removal: large throughout.
			conv := mustGroup(t, ctx, srv, 1, "big", []int64{2, 3, 4})
			before := parkSession(t, srv, 2, "phone-2", 5, conv.ID)
			sendAs := func(tag string) chat.Message {
				t.Helper()
				r, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 3, ClientMsgID: newID(), Body: tag})
				if err != nil {
					t.Fatal(err)
				}
				return r.Message
			}
			first := sendAs("owed 1")
			sendAs("owed 2")
			if _, err := srv.Service.React(ctx, chat.ReactionRequest{ConversationID: conv.ID, UserID: 4, ClientMsgID: newID(),
				TargetSeq: first.Seq, Emoji: "👍", On: true}); err != nil {
				t.Fatal(err)
			}
			owedUpTo := lastSeq(srv, conv.ID)
			if err := srv.Service.RemoveMember(ctx, conv.ID, 1, 2); err != nil {
				t.Fatal(err)
			}
			sendAs("after the removal")
			var rejoin, back int64
			if readded {
				rejoin = lastSeq(srv, conv.ID)
				if _, _, err := srv.Service.AddMember(ctx, conv.ID, 1, 2); err != nil {
					t.Fatal(err)
				}
				back = sendAs("after coming back").Seq
			}

			phone := resumePresent(t, srv.MQTTAddr(), 2, "phone-2", 5, "the persistent session was not resumed")
			want := owedUpTo - before
			if readded {
				want += back - rejoin // the join's system entry, then the message
			}
			got := entriesThenNothing(t, srv, phone, conv.ID, 2, int(want))
			for i, ev := range got[:owedUpTo-before] {
				if ev.Seq != before+1+int64(i) {
					t.Fatalf("entry %d has seq %d, want %d: %+v", i, ev.Seq, before+1+int64(i), got)
				}
				switch ev.Type {
				case chat.EventMessageNew:
					if ev.Body == nil || *ev.Body == "" || ev.ClientMsgID == "" {
						t.Errorf("owed message %d came without its content: %+v", ev.Seq, ev)
					}
				case chat.EventReactionUpdated:
					if ev.Emoji != "👍" || ev.On == nil || !*ev.On {
						t.Errorf("owed reaction %d came without its content: %+v", ev.Seq, ev)
					}
				}
			}
			if readded {
				if last := got[len(got)-1]; last.Seq != back || last.Body != nil {
					t.Errorf("the message after the re-add is a member's, slim: got %+v, want seq %d without body", last, back)
				}
			}
		})
	}
}

// entriesThenNothing reads the first n entry events of conv that c
// (user's session) receives, then fails on any other before a message of
// a group user 1 makes with user afterwards: what the session still had
// to send of conv would come before it.
func entriesThenNothing(t *testing.T, srv *server.Server, c *mqtttest.Client, conv, user int64, n int) []ownedEntry {
	t.Helper()
	next := func(what string) ownedEntry {
		pk := nextPublish(t, c, what, 10*time.Second, func(packets.Packet) bool { return true })
		var ev ownedEntry
		if err := json.Unmarshal(pk.Payload, &ev); err != nil {
			t.Fatalf("bad payload %s: %v", pk.Payload, err)
		}
		return ev
	}
	isEntry := func(ev ownedEntry) bool { return ev.ConversationID == conv && chat.Event{Type: ev.Type}.IsEntry() }
	var got []ownedEntry
	for len(got) < n {
		if ev := next(fmt.Sprintf("entry %d/%d of the group", len(got)+1, n)); isEntry(ev) {
			got = append(got, ev)
		}
	}
	other := mustGroup(t, context.Background(), srv, 1, "sentinel", []int64{user})
	mustSendAs(t, srv, other.ID, 1, "sentinel")
	for {
		ev := next("the sentinel")
		if ev.Type == chat.EventMessageNew && ev.ConversationID == other.ID {
			return got
		}
		if isEntry(ev) {
			t.Fatalf("after the %d entries owed the session also got %+v", n, ev)
		}
	}
}
