package client_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/server"
)

// An ephemeral client (nothing replayed: history brings what it missed)
// whose user became a member of a group while it was offline (created
// with them, or added to a group whose history is "all"), so that no
// conversation.created or member.added reached it, must catch the group
// up from that join on reconnecting: the messages written since are its
// user's and come before the first live one, each once; those from before
// the join are not handed on as new.
func TestAGroupJoinedWhileOfflineIsCaughtUpFromTheJoinAfterAReconnect(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"created", "added"} {
		t.Run(how, func(t *testing.T) {
			j := joinWhileOffline(t, how)
			handedOnOnce(t, j.b, j.g, j.want)
		})
	}
}

// The catch-up takes where the user's membership of a group joined while
// offline starts from the inbox (joinSeq): no history read looks for it.
// Every history read of the group that reaches the node (counted by a
// hook of its broker) pages forward (afterSeq) from the join on, filling
// what was written since.
func TestAGroupJoinedWhileOfflineIsCaughtUpWithoutAHistoryReadToFindTheJoin(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"created", "added"} {
		t.Run(how, func(t *testing.T) {
			j := joinWhileOffline(t, how)
			handedOnOnce(t, j.b, j.g, j.want)
			reads, fills := j.rpcs.of("2", "history"), 0
			for _, p := range reads {
				var req struct {
					ConversationID int64  `json:"conversationId"`
					AfterSeq       *int64 `json:"afterSeq"`
				}
				if err := json.Unmarshal(p, &req); err != nil {
					t.Fatalf("history request %s: %v", p, err)
				}
				if req.ConversationID != j.g {
					continue
				}
				if req.AfterSeq == nil || *req.AfterSeq < j.join {
					t.Errorf("user 2 read history %s, not forward from the join at %d (%d history reads in all)", p, j.join, len(reads))
				}
				fills++
			}
			if fills == 0 {
				t.Errorf("no history read of the group by user 2 reached the node (%d in all): the catch-up's fill went unseen", len(reads))
			}
		})
	}
}

// offlineJoin is what joinWhileOffline leaves: user 2's ephemeral client
// b, the group g they joined while it was offline after seq join, the
// seqs of the messages b must hand on (those written since the join, then
// one live), and the RPCs the node was asked since it started.
type offlineJoin struct {
	b    *client.Client
	g    int64
	join int64
	want []int64
	rpcs *rpcRecorder
}

// joinWhileOffline connects user 2 through a proxy, cuts it, makes them a
// member of a group while it is down (how: "created" with them, or
// "added" to one whose history is "all" after two messages), writes three
// messages, lets it reconnect and writes one more.
func joinWhileOffline(t *testing.T, how string) offlineJoin {
	t.Helper()
	srv, _, a, direct := sender(t)
	j := offlineJoin{rpcs: recordRPCs(t, srv)}
	ctx := ctxFor(t, 60*time.Second)
	px := newProxy(t, srv.MQTTAddr())
	j.b = connect(t, testConfig(t, px.URL(), 2))
	// An entry that came after the connection: its catch-up (the inbox
	// as it was before the join) is done.
	sendN(t, a, direct, 1, "before going offline")
	messages(t, j.b, direct, 1, 10*time.Second)

	cutOff(t, px, j.b)
	var g client.Conversation
	var err error
	if how == "created" {
		g, err = a.CreateGroup(ctx, how, []int64{2})
	} else {
		all := "all"
		g, err = a.CreateGroup(ctx, how, nil)
		if err == nil {
			_, err = a.UpdateGroup(ctx, g.ID, client.GroupUpdate{HistoryVisible: &all})
		}
		if err == nil {
			j.join = sendN(t, a, g.ID, 2, "before the join")[1]
			_, err = a.AddMember(ctx, g.ID, 2)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	j.g = g.ID
	j.want = sendN(t, a, g.ID, 3, "while offline")
	px.Resume()
	if err := j.b.AwaitConnection(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	j.want = append(j.want, sendN(t, a, g.ID, 1, "live")[0])
	return j
}

// rpcRecorder is a hook of a node's broker that notes the payload of
// every RPC request it reads, by user and method.
type rpcRecorder struct {
	mqtt.HookBase
	mu    sync.Mutex
	calls map[[2]string][][]byte
}

func recordRPCs(t *testing.T, srv *server.Server) *rpcRecorder {
	t.Helper()
	h := &rpcRecorder{calls: map[[2]string][][]byte{}}
	if err := srv.Broker.Server.AddHook(h, nil); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *rpcRecorder) ID() string           { return "rpc-recorder" }
func (h *rpcRecorder) Provides(b byte) bool { return b == mqtt.OnPacketRead }
func (h *rpcRecorder) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if method, ok := strings.CutPrefix(pk.TopicName, "chat/v1/rpc/"); ok && pk.FixedHeader.Type == packets.Publish {
		k := [2]string{string(cl.Properties.Username), method}
		h.mu.Lock()
		h.calls[k] = append(h.calls[k], slices.Clone(pk.Payload))
		h.mu.Unlock()
	}
	return pk, nil
}

// of returns the payloads of user's requests of method so far, in order.
func (h *rpcRecorder) of(user, method string) [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls[[2]string{user, method}])
}

// handedOnOnce checks that c hands on the message.new events of conv of
// seqs want, in that order, and no other, and that Positions has conv at
// the last.
func handedOnOnce(t *testing.T, c *client.Client, conv int64, want []int64) {
	t.Helper()
	var seqs []int64
	for _, ev := range messages(t, c, conv, len(want), 10*time.Second) {
		seqs = append(seqs, ev.Seq)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("messages of conversation %d handed on: seqs %v, want %v", conv, seqs, want)
	}
	noMoreMessages(t, c, conv, 500*time.Millisecond)
	if h, ok := c.Positions()[conv]; !ok || h != want[len(want)-1] {
		t.Fatalf("conversation %d in Positions: %d %v, want tracked at %d", conv, h, ok, want[len(want)-1])
	}
}
