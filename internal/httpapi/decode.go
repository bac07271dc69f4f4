package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/strictjson"
)

// maxRequestBytes bounds a request body (HTTP) or RPC payload (see
// chat.Limits.MaxRequestBytes).
func (a *API) maxRequestBytes() int64 { return a.svc.Limits.MaxRequestBytes() }

// readBody reads a POST body within the limit, after checking its media
// type. A missing Content-Type is accepted: the body can only be JSON anyway
// and minimal clients omit it. A present one must be JSON, so that a form
// post (curl -d without -H) or a text/plain fetch fails with a clear 415
// instead of a confusing parse error.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			return nil, errMediaType("Content-Type is malformed; send application/json")
		}
		if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
			return nil, errMediaType("Content-Type must be application/json, not " + mt)
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return nil, errMediaType("JSON must be UTF-8, not charset " + cs)
		}
	}
	limit := a.maxRequestBytes()
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	// The body is in: a deadline the server set for it (chatd's
	// requestBodyTimeout) must not end the request while it is served.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, chat.Errorf(chat.CodeTooLarge, "request body is larger than %d bytes", limit)
		}
		// A body that cannot be read is a broken client connection.
		return nil, chat.Errorf(chat.CodeInvalid, "request body could not be read")
	}
	return b, nil
}

// decodeStrict decodes one JSON object into v: unknown fields, trailing data
// and non-object documents are rejected, so a typo in a field name fails
// loudly instead of silently meaning "absent". An empty document is {} when
// allowEmpty, so RPCs and body-less POSTs may send nothing at all.
func decodeStrict(data []byte, v any, allowEmpty bool) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		if allowEmpty {
			return nil
		}
		return chat.Errorf(chat.CodeInvalid, "request body is empty; send a JSON object")
	}
	if data[0] != '{' {
		return chat.Errorf(chat.CodeInvalid, "request body must be a JSON object")
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD.
	if !utf8.Valid(data) {
		return chat.Errorf(chat.CodeInvalid, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return chat.Errorf(chat.CodeInvalid, "request body has data after the JSON object")
	}
	return strictjson.ExactKeys(data, reflect.TypeOf(v))
}

// jsonError turns a decoder error into a client message that names the
// field without echoing the input.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tpe *time.ParseError
	switch {
	case errors.As(err, &tpe), strings.HasPrefix(err.Error(), "Time.UnmarshalJSON: "):
		// A well-formed document whose time field does not parse (time's
		// own decoder has no field name to give).
		return chat.Errorf(chat.CodeInvalid, "a time must be an RFC 3339 string like 2026-03-01T12:00:00Z")
	case errors.As(err, &syn):
		return chat.Errorf(chat.CodeInvalid, "malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return chat.Errorf(chat.CodeInvalid, "field %q has the wrong type, want %s", typ.Field, kindName(typ.Type.Kind().String()))
		}
		return chat.Errorf(chat.CodeInvalid, "request body has the wrong JSON type")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return chat.Errorf(chat.CodeInvalid, "malformed JSON: unexpected end")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this; the field name is the
		// client's own input, quoted by the decoder.
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
		return chat.Errorf(chat.CodeInvalid, "unknown field %q", strictjson.Clip(name))
	default:
		return chat.Errorf(chat.CodeInvalid, "malformed JSON")
	}
}

func kindName(k string) string {
	switch k {
	case "int", "int64":
		return "an integer (int64)"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	default:
		return "a " + k
	}
}

// parseUint parses a non-negative int64 in canonical decimal: digits only,
// no leading zeros ("0" itself is canonical). strconv alone would accept
// "+5" and "007"; ids stay canonical so that one id has one spelling over
// HTTP, RPC and in MQTT topics (hooks.ParseID), and caches and logs see one
// spelling. Overflow fails like any other bad input.
func parseUint(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// parseID parses a positive int64.
func parseID(what, s string) (int64, error) {
	n, ok := parseUint(s)
	if !ok || n <= 0 {
		return 0, chat.Errorf(chat.CodeInvalid, "%s must be a positive integer", what)
	}
	return n, nil
}

// pathID reads and validates the path wildcard name. field is what the
// error message calls it: the RPC parameter's name, so both transports
// answer a bad id with the same words.
func pathID(r *http.Request, name, field string) (int64, error) {
	return parseID(field, r.PathValue(name))
}

// pathConversation reads the {id} of a /v1/conversations/{id} route into
// *conv.
func pathConversation(r *http.Request, conv *int64) error {
	var err error
	*conv, err = pathID(r, "id", "conversationId")
	return err
}

// pathConversationAnd reads a conversation route's {id} into *conv and
// the id of its segment name ({userId}, {seq}: named as the RPC names
// it) into *id.
func pathConversationAnd(r *http.Request, conv *int64, name string, id *int64) error {
	if err := pathConversation(r, conv); err != nil {
		return err
	}
	var err error
	*id, err = pathID(r, name, name)
	return err
}

// query is a request's query string, read after checkQuery validated it
// against the parameters its route takes (endpoint.takes).
type query struct {
	values url.Values
}

// checkQuery refuses unknown or repeated query parameters, as unknown JSON
// fields are refused, because "?before=10" silently meaning "from the
// newest" hides bugs. Every route's query is checked so, by serveEndpoint.
func checkQuery(r *http.Request, known []string) error {
	_, err := parseQuery(r, known...)
	return err
}

// queryOf is the query of a request whose query checkQuery accepted.
func queryOf(r *http.Request) query {
	return query{values: r.URL.Query()}
}

func parseQuery(r *http.Request, known ...string) (query, error) {
	if r.URL.RawQuery == "" {
		return query{}, nil
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, chat.Errorf(chat.CodeInvalid, "malformed query string")
	}
	for k, vs := range v {
		found := false
		for _, name := range known {
			if k == name {
				found = true
				break
			}
		}
		if !found && len(known) == 0 {
			return query{}, chat.Errorf(chat.CodeInvalid, "unknown query parameter %q (this route takes none)", strictjson.Clip(k))
		}
		if !found {
			return query{}, chat.Errorf(chat.CodeInvalid, "unknown query parameter %q (known: %s)", strictjson.Clip(k), strings.Join(known, ", "))
		}
		if len(vs) > 1 {
			return query{}, chat.Errorf(chat.CodeInvalid, "query parameter %q is given more than once", k)
		}
	}
	return query{values: v}, nil
}

// pageQuery reads the query of a paged list: ?limit=N&cursor=C.
func pageQuery(r *http.Request) (limit int, cursor string, err error) {
	q := queryOf(r)
	if limit, err = q.int("limit"); err != nil {
		return 0, "", err
	}
	return limit, q.str("cursor"), nil
}

// str returns a parameter, "" when absent.
func (q query) str(name string) string { return q.values.Get(name) }

// int64 returns a non-negative integer parameter; absent or empty is 0,
// which every endpoint reads as "not given".
func (q query) int64(name string) (int64, error) {
	s := q.values.Get(name)
	if s == "" {
		return 0, nil
	}
	n, ok := parseUint(s)
	if !ok {
		return 0, chat.Errorf(chat.CodeInvalid, "%s must be a non-negative integer", name)
	}
	return n, nil
}

// int returns a non-negative integer parameter that must fit an int.
func (q query) int(name string) (int, error) {
	n, err := q.int64(name)
	if err != nil {
		return 0, err
	}
	if int64(int(n)) != n {
		return 0, chat.Errorf(chat.CodeInvalid, "%s is too large", name)
	}
	return int(n), nil
}
