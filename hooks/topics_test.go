package hooks

import (
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

func TestParseTopicAcceptsOnlyCanonicalChatTopics(t *testing.T) {
	good := map[string]Route{
		"chat/v1/conv/7/msg":         {Kind: RouteMsg, ConversationID: 7},
		"chat/v1/conv/123/read":      {Kind: RouteRead, ConversationID: 123},
		"chat/v1/conv/9/typing":      {Kind: RouteTyping, ConversationID: 9},
		"chat/v1/rpc/history":        {Kind: RouteRPC, Method: "history"},
		"chat/v1/rpc/members.remove": {Kind: RouteRPC, Method: "members.remove"},
	}
	for topic, want := range good {
		if got := ParseTopic(topic); got != want {
			t.Errorf("ParseTopic(%q) = %+v, want %+v", topic, got, want)
		}
	}
	for _, bad := range []string{"", "chat/v1/conv//msg", "chat/v1/conv/0/msg", "chat/v1/conv/-1/msg", "chat/v1/conv/01/msg",
		"chat/v1/conv/+/msg", "chat/v1/conv/#", "chat/v1/conv/7/msg/extra", "chat/v1/conv/7/../msg", "chat/v1/conv/7\x00/msg",
		"chat/v1/conv/9223372036854775808/msg", "chat/v2/conv/7/msg", "chat/v1/user/1/events", "chat/v1/rpc/", "chat/v1/rpc/A",
		"chat/v1/rpc/x/y", "/chat/v1/conv/7/msg", "chat/v1/conv/7/MSG"} {
		if got := ParseTopic(bad); got.Kind != RouteInvalid {
			t.Errorf("ParseTopic(%q) = %+v, want invalid", bad, got)
		}
	}
}

func TestSubscribeAllowedOnlyInsideOwnTree(t *testing.T) {
	for _, f := range []string{"chat/v1/user/7/events", "chat/v1/user/7/#", "chat/v1/user/7/+", "chat/v1/user/7/rpc/+"} {
		if !SubscribeAllowed(7, f) {
			t.Errorf("%q refused", f)
		}
	}
	for _, f := range []string{"chat/v1/user/8/events", "chat/v1/user/7", "chat/v1/user/7/", "chat/v1/user/+/events", "chat/v1/#", "#", "+/+/+/+/+",
		"chat/v1/user/70/events", "$share/g/chat/v1/user/7/events", "chat/v1/user/7/#/x", "chat/v1/user/7/a#", "chat/v1/user/7/\x00"} {
		if SubscribeAllowed(7, f) {
			t.Errorf("%q allowed", f)
		}
	}
}

func TestResponseTopicMustBeAPlainTopicInOwnTree(t *testing.T) {
	if !ResponseTopicAllowed(7, "chat/v1/user/7/rpc/abc") {
		t.Fatal("own reply topic refused")
	}
	for _, rt := range []string{"chat/v1/user/8/rpc", "chat/v1/user/7/", "chat/v1/user/7/events", "chat/v1/user/7/#", "chat/v1/user/7/+", "x", "chat/v1/user/7/" + strings.Repeat("a", 600)} {
		if ResponseTopicAllowed(7, rt) {
			t.Errorf("%q allowed", rt)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	cases := []struct {
		f, t string
		ok   bool
	}{
		{"chat/v1/user/7/events", "chat/v1/user/7/events", true},
		{"chat/v1/user/7/#", "chat/v1/user/7/events", true},
		{"chat/v1/user/7/+", "chat/v1/user/7/events", true},
		{"chat/v1/user/7/+", "chat/v1/user/7/rpc/x", false},
		{"chat/v1/user/7/rpc/#", "chat/v1/user/7/events", false},
	}
	for _, c := range cases {
		if FilterMatches(c.f, c.t) != c.ok {
			t.Errorf("FilterMatches(%q, %q) != %v", c.f, c.t, c.ok)
		}
	}
}

func FuzzParseTopic(f *testing.F) {
	for _, s := range []string{"chat/v1/conv/7/msg", "chat/v1/rpc/history", "chat/v1/conv/01/read", "#", "chat/v1/conv/9223372036854775807/typing"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, topic string) {
		r := ParseTopic(topic)
		switch r.Kind {
		case RouteMsg, RouteRead, RouteTyping:
			if r.ConversationID <= 0 || strings.ContainsAny(topic, "+#\x00") {
				t.Fatalf("accepted %q as %+v", topic, r)
			}
		case RouteRPC:
			if r.Method == "" || strings.ContainsAny(r.Method, "/+#") {
				t.Fatalf("accepted %q as %+v", topic, r)
			}
		}
	})
}

func FuzzSubscribeAllowed(f *testing.F) {
	for _, s := range []string{"chat/v1/user/7/events", "chat/v1/user/7/#", "chat/v1/#", "chat/v1/user/+/events"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, filter string) {
		if SubscribeAllowed(7, filter) {
			// Whatever is allowed can only ever match topics in user 7's tree.
			if !strings.HasPrefix(filter, "chat/v1/user/7/") || FilterMatches(filter, "chat/v1/user/8/events") {
				t.Fatalf("%q allowed beyond the own tree", filter)
			}
		}
	})
}

func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{`{"clientMsgId":"6f1c1f1e-8d2a-4b8e-9a55-0f6f2f0d9b11","body":"hi"}`, `{}`, `[`, `{"body":"\ud800"}`, "{\"body\":\"\xff\"}", `{"a":1}`, `{"body":"x"} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p chat.SendPayload
		if err := decodeStrict(b, &p); err == nil && !strings.Contains(string(b), "{") {
			t.Fatalf("accepted non-object %q", b)
		}
	})
}

// mochiDropsPublish names exactly the publishes mochi's processPublish
// drops without a hook: those OnPacketRead must answer itself, and only
// those (OnPublish answers the rest).
func TestMochiDropsPublishExactlyTheTopicsMochiDrops(t *testing.T) {
	for topic, want := range map[string]bool{
		"$SYS/broker/x":               true,
		"$sys/x":                      true,
		"$share":                      true,
		"$share/g":                    true,
		"$foo/bar":                    false,
		"$share/g/chat/v1/conv/1/msg": false,
		"chat/v1/conv/1/msg":          false,
		"chat/v1/conv/+/msg":          false, // a protocol error: the connection ends, unanswered
		"":                            false, // no topic, no alias: a protocol error too
	} {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 1, TopicName: topic}
		if got := mochiDropsPublish(pk, TopicAliasMaximum); got != want {
			t.Errorf("mochiDropsPublish(%q) = %v, want %v", topic, got, want)
		}
	}
}
