package hooks

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// TopicPrefix is the versioned root of every chat topic.
const TopicPrefix = "chat/v1/"

// RouteKind says what a publish topic asks for.
type RouteKind int

const (
	RouteInvalid RouteKind = iota
	RouteMsg               // chat/v1/conv/{cid}/msg
	RouteRead              // chat/v1/conv/{cid}/read
	RouteTyping            // chat/v1/conv/{cid}/typing
	RouteRPC               // chat/v1/rpc/{method}
	RouteEdit              // chat/v1/conv/{cid}/edit
	RouteRecall            // chat/v1/conv/{cid}/recall
	RouteReact             // chat/v1/conv/{cid}/react
)

// Route is a parsed publish topic.
type Route struct {
	Kind           RouteKind
	ConversationID int64
	Method         string
}

// ParseTopic parses a publish topic. Ids are canonical positive decimals
// (no sign, no leading zeros) so one conversation has one topic.
func ParseTopic(topic string) Route {
	rest, ok := strings.CutPrefix(topic, TopicPrefix)
	if !ok {
		return Route{}
	}
	if m, ok := strings.CutPrefix(rest, "rpc/"); ok {
		if !validMethod(m) {
			return Route{}
		}
		return Route{Kind: RouteRPC, Method: m}
	}
	rest, ok = strings.CutPrefix(rest, "conv/")
	if !ok {
		return Route{}
	}
	idPart, action, ok := strings.Cut(rest, "/")
	if !ok {
		return Route{}
	}
	id, ok := ParseID(idPart)
	if !ok {
		return Route{}
	}
	kind, ok := conversationActions[action]
	if !ok {
		return Route{}
	}
	return Route{Kind: kind, ConversationID: id}
}

// conversationActions are the last segments of a conversation's topics.
var conversationActions = map[string]RouteKind{
	"msg":    RouteMsg,
	"read":   RouteRead,
	"typing": RouteTyping,
	"edit":   RouteEdit,
	"recall": RouteRecall,
	"react":  RouteReact,
}

// ConversationActions returns the last segments of a conversation's
// publish topics (chat/v1/conv/{cid}/{action}), sorted, so that a test
// can go through every one and a new one cannot go untested.
func ConversationActions() []string {
	return slices.Sorted(maps.Keys(conversationActions))
}

func validMethod(m string) bool {
	if m == "" || len(m) > 64 {
		return false
	}
	for _, r := range m {
		if !(r >= 'a' && r <= 'z' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// ParseID parses a canonical positive int64.
func ParseID(s string) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// EventsTopic is the one topic a user's clients subscribe to for events.
func EventsTopic(userID int64) string {
	return UserTree(userID) + eventsLevel
}

// eventsLevel is the events topic's level under a user's tree.
const eventsLevel = "events"

// UserTree is the topic tree a user may subscribe to and receive replies in.
func UserTree(userID int64) string {
	return TopicPrefix + "user/" + strconv.FormatInt(userID, 10) + "/"
}

// SubscribeAllowed reports whether userID may subscribe to filter: only
// inside its own chat/v1/user/{id}/ tree, wildcards allowed only there, and
// at most MaxTopicLength bytes (a persistent session keeps its filters).
func SubscribeAllowed(userID int64, filter string) bool {
	if len(filter) > MaxTopicLength || mqtt.IsSharedFilter(filter) || strings.ContainsRune(filter, 0) {
		return false
	}
	rest, ok := strings.CutPrefix(filter, UserTree(userID))
	if !ok || rest == "" {
		return false
	}
	levels := strings.Split(rest, "/")
	for i, l := range levels {
		if l == "#" && i != len(levels)-1 {
			return false
		}
		if l != "#" && l != "+" && strings.ContainsAny(l, "#+") {
			return false
		}
	}
	return true
}

// FilterMatches reports whether an MQTT subscription filter matches topic.
func FilterMatches(filter, topic string) bool {
	fl := strings.Split(filter, "/")
	tl := strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return true
		}
		if i >= len(tl) {
			return false
		}
		if f != "+" && f != tl[i] {
			return false
		}
	}
	return len(fl) == len(tl)
}

// ResponseTopicAllowed reports whether a v5 response topic lies in the
// caller's own tree and is a plain topic name (no wildcards) of at most
// MaxTopicLength bytes: the server holds it with the request until the
// reply is written, as it holds any topic or filter. The events topic is
// not one: a client takes whatever comes on it for an event.
func ResponseTopicAllowed(userID int64, topic string) bool {
	rest, ok := strings.CutPrefix(topic, UserTree(userID))
	return ok && rest != "" && rest != eventsLevel && len(topic) <= MaxTopicLength && !strings.ContainsAny(topic, "#+\x00")
}
