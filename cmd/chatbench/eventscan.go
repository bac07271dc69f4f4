package main

import (
	"encoding/json"
	"errors"
	"strconv"
)

// decodeEvent fills ev from a chatd event's JSON. It reads only the
// top-level fields the bench uses and skips the rest without building
// anything: encoding/json's reflective decoding was over a third of the
// load generator's CPU, which on a machine shared with chatd is CPU taken
// from the server under test. Whatever it does not handle exactly (escapes
// or non-ASCII in the strings it keeps, a value of the wrong type, a
// malformed top level) goes to encoding/json. For the JSON chatd writes
// (exact-case keys) the result is what json.Unmarshal gives; nested values
// it skips are not validated.
func decodeEvent(b []byte, ev *event) error {
	if scanEvent(b, ev) {
		return nil
	}
	*ev = event{}
	return json.Unmarshal(b, ev)
}

var errScan = errors.New("scan")

// scanEvent reports false when it cannot decode b exactly.
func scanEvent(b []byte, ev *event) bool {
	*ev = event{}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		key, next, simple := scanString(b, i)
		if next < 0 || !simple {
			return false
		}
		i = skipWS(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		end, err := skipValue(b, i)
		if err != nil {
			return false
		}
		if !assignField(ev, key, b[i:end]) {
			return false
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return false
		}
		if b[i] == '}' {
			return skipWS(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return false
		}
		i = skipWS(b, i+1)
	}
}

// assignField stores the fields event has; false when a value of one of
// them is not in the plain form this scanner handles.
// deliveredTypes are the event types a delivery carries in the bench's
// workloads, set from these strings rather than copied per event.
var deliveredTypes = [...]string{"message.new", "message.edited", "reaction.updated", "read.updated"}

func assignField(ev *event, key []byte, v []byte) bool {
	switch string(key) {
	case "type":
		// The types the bench sees per delivery, without a copy each.
		for _, t := range deliveredTypes {
			if len(v) == len(t)+2 && v[0] == '"' && string(v[1:len(v)-1]) == t {
				ev.Type = t
				return true
			}
		}
		return scanPlainString(v, &ev.Type)
	case "clientMsgId":
		return scanPlainString(v, &ev.ClientMsgID)
	case "code":
		return scanPlainString(v, &ev.Code)
	case "conversationId":
		return scanInt(v, &ev.ConversationID)
	case "seq":
		return scanInt(v, &ev.Seq)
	case "senderId":
		return scanInt(v, &ev.SenderID)
	}
	return true
}

func scanPlainString(v []byte, dst *string) bool {
	if string(v) == "null" {
		return true
	}
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	s, end, simple := scanString(v, 0)
	if end != len(v) || !simple {
		return false
	}
	*dst = string(s)
	return true
}

func scanInt(v []byte, dst *int64) bool {
	if string(v) == "null" {
		return true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads the string starting at b[i] == '"'. It returns its raw
// contents, the index after the closing quote (-1 if unterminated) and
// whether it had no escapes and only printable ASCII (so the raw bytes
// are the decoded value).
func scanString(b []byte, i int) (raw []byte, next int, simple bool) {
	simple = true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, simple
		case c == '\\':
			simple = false
			j++
		case c < 0x20:
			return nil, -1, false
		case c >= 0x80:
			simple = false
		}
	}
	return nil, -1, false
}

// skipValue returns the index just after the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errScan
	}
	switch c := b[i]; {
	case c == '"':
		_, next, _ := scanString(b, i)
		if next < 0 {
			return 0, errScan
		}
		return next, nil
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, next, _ := scanString(b, j)
				if next < 0 {
					return 0, errScan
				}
				j = next - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errScan
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, errScan
		}
		return j, nil
	}
}
