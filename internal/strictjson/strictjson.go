// Package strictjson holds the one rule both transports apply to a
// client's JSON after encoding/json decoded it: field names exactly as
// documented, each given once (encoding/json folds case and lets a later
// duplicate win), and no string with a \u escape of half a surrogate pair
// (encoding/json stores U+FFFD in its place, the silent alteration invalid
// UTF-8 is refused for). It has no state but a cache of struct field names, safe
// for concurrent use.
package strictjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	chat "github.com/chatd/chatd"
)

// ExactKeys checks what encoding/json lets through: it matches object keys
// to fields without regard to case ({"SEQ":1} sets seq) and lets a later
// duplicate key win ({"seq":1,"seq":2}), and it decodes a \u escape of a
// lone surrogate ("\ud800") as U+FFFD. data is one valid JSON value
// (decoded already) into a value of type t; every key of an object decoded
// into a struct must be a field's name exactly, no object may repeat a
// key, and no string may hold a lone surrogate. The error is chat's
// invalid. It only scans: no allocation unless a
// key holds an escape.
func ExactKeys(data []byte, t reflect.Type) error {
	s := keyScan{data: data}
	err := s.value(t)
	if ls, ok := err.(*loneSurrogateError); ok {
		where := "a string"
		if ls.path != "" {
			where = ls.path
		}
		return chat.Errorf(chat.CodeInvalid, `%s holds \u%04x, half of a surrogate pair: JSON text must be whole characters`, where, ls.r)
	}
	return err
}

// loneSurrogateError is a lone surrogate found by the scan, with the path
// of the field holding it (built on the way out, so that a valid document
// costs nothing for it).
type loneSurrogateError struct {
	r    rune
	path string // "attachments[1].caption"; "" for a top-level string
}

func (e *loneSurrogateError) Error() string { return "lone surrogate" }

// in prefixes the path of a lone surrogate error with the step leading to
// it: a field name (".name") or an array index ("[i]").
func in(err error, step string) error {
	if ls, ok := err.(*loneSurrogateError); ok {
		if ls.path != "" && ls.path[0] != '[' {
			step += "."
		}
		ls.path = step + ls.path
	}
	return err
}

type keyScan struct {
	data []byte
	i    int
}

func (s *keyScan) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str skips a string starting at s.i and returns its raw contents.
func (s *keyScan) str() (raw []byte, escaped bool) {
	start := s.i + 1
	s.i = start
	for {
		j := bytes.IndexAny(s.data[s.i:], `"\`)
		if j < 0 {
			s.i = len(s.data)
			return s.data[start:], escaped
		}
		s.i += j
		if s.data[s.i] == '"' {
			s.i++
			return s.data[start : s.i-1], escaped
		}
		escaped = true
		s.i += 2
	}
}

func (s *keyScan) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // a type that decodes itself says what it accepts
	}
	s.space()
	if s.i >= len(s.data) {
		return nil
	}
	switch s.data[s.i] {
	case '{':
		return s.object(t)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		s.i++
		for n := 0; ; n++ {
			s.space()
			if s.i >= len(s.data) || s.data[s.i] == ']' {
				s.i++
				return nil
			}
			if err := s.value(elem); err != nil {
				return in(err, "["+strconv.Itoa(n)+"]")
			}
			s.space()
			if s.i < len(s.data) && s.data[s.i] == ',' {
				s.i++
			}
		}
	case '"':
		if raw, escaped := s.str(); escaped {
			if r, ok := loneSurrogate(raw); ok {
				return &loneSurrogateError{r: r}
			}
		}
	default:
		for s.i < len(s.data) && !strings.ContainsRune(",]} \t\n\r", rune(s.data[s.i])) {
			s.i++
		}
	}
	return nil
}

func (s *keyScan) object(t reflect.Type) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	var buf [8][]byte // most objects have fewer keys: no allocation
	seen := buf[:0]
	s.i++
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] == '}' {
			s.i++
			return nil
		}
		raw, escaped := s.str()
		key := raw
		if escaped {
			var k string
			if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &k); err == nil {
				key = []byte(k)
			}
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return chat.Errorf(chat.CodeInvalid, "field %q is given more than once", Clip(string(key)))
			}
		}
		seen = append(seen, key)
		ft := elem
		if fields != nil {
			var ok bool
			if ft, ok = fields[string(key)]; !ok {
				return chat.Errorf(chat.CodeInvalid, "unknown field %q (field names are case-sensitive)", Clip(string(key)))
			}
		}
		s.space()
		s.i++ // ':'
		if err := s.value(ft); err != nil {
			return in(err, Clip(string(key)))
		}
		s.space()
		if s.i < len(s.data) && s.data[s.i] == ',' {
			s.i++
		}
	}
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	fieldCache      sync.Map // reflect.Type -> map[string]reflect.Type
)

// jsonFields maps a struct's JSON field names, as encoding/json names
// them (tags, embedded structs' fields promoted), to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addJSONFields(t, m)
	fieldCache.Store(t, m)
	return m
}

func addJSONFields(t reflect.Type, m map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addJSONFields(ft, m)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
}

// loneSurrogate finds the first \u escape in raw, the contents of a valid
// JSON string, that is a surrogate not paired as UTF-16 pairs them: a high
// one (D800-DBFF) not followed at once by an escaped low one (DC00-DFFF),
// or a low one alone.
func loneSurrogate(raw []byte) (rune, bool) {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return 0, false
		}
		i += j
		if i+6 > len(raw) || raw[i+1] != 'u' {
			i += 2 // \" \\ \/ \b \f \n \r \t
			continue
		}
		r := hex4(raw[i+2 : i+6])
		i += 6
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return r, true
		case r >= 0xd800 && r <= 0xdbff:
			if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
				return r, true
			}
			if lo := hex4(raw[i+2 : i+6]); lo < 0xdc00 || lo > 0xdfff {
				return r, true
			}
			i += 6
		}
	}
	return 0, false
}

// hex4 is the value of four hexadecimal digits (valid JSON's \u escape).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// MaxQuotedBytes bounds the client input an error message repeats (a
// field or parameter name): a name as long as the body limit allows
// would otherwise come back whole, and an MQTT reason string holds at
// most 65,535 bytes.
const MaxQuotedBytes = 64

// Clip returns s cut to at most MaxQuotedBytes at a character boundary,
// with "..." when cut, for an error message to quote.
func Clip(s string) string {
	if len(s) <= MaxQuotedBytes {
		return s
	}
	n := MaxQuotedBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
