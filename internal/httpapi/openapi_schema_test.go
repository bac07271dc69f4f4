package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/push"
)

// schemaDoc is docs/openapi.yaml read as plain data, for checking answers
// against the schemas a client generator would build from it.
type schemaDoc struct {
	root map[string]any
}

func loadSchemaDoc(t *testing.T) schemaDoc {
	t.Helper()
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("read spec: %v", err)
	}
	var root map[string]any
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatalf("parse spec: %v", err)
	}
	return schemaDoc{root: root}
}

func (d schemaDoc) ref(ref string) map[string]any {
	var cur any = d.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, _ := cur.(map[string]any)
		cur = m[part]
	}
	m, _ := cur.(map[string]any)
	return m
}

func (d schemaDoc) deref(m map[string]any) map[string]any {
	for m != nil {
		r, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m = d.ref(r)
	}
	return m
}

// response returns the documented response of an operation for status, nil
// when that status is not listed.
func (d schemaDoc) response(method, path string, status int) map[string]any {
	paths, _ := d.root["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	if op == nil {
		return nil
	}
	rs, _ := op["responses"].(map[string]any)
	r, _ := rs[strconv.Itoa(status)].(map[string]any)
	return d.deref(r)
}

// check reports every way an HTTP answer to method path (the route
// pattern) differs from the spec: a status the operation does not list, or
// a JSON body that breaks the status's schema.
func (d schemaDoc) check(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	r := d.response(method, path, status)
	if r == nil {
		t.Errorf("%s %s answered %d, which the spec does not list; body %s", method, path, status, truncate(body))
		return
	}
	content, _ := r["content"].(map[string]any)
	mt, _ := content["application/json"].(map[string]any)
	if mt == nil {
		if len(strings.TrimSpace(string(body))) != 0 {
			t.Errorf("%s %s %d: the spec documents no body, got %s", method, path, status, truncate(body))
		}
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s %s %d: body is not JSON: %v", method, path, status, err)
		return
	}
	schema, _ := mt["schema"].(map[string]any)
	for _, p := range d.validate(schema, v, "$") {
		t.Errorf("%s %s %d: %s; body %s", method, path, status, p, truncate(body))
	}
}

// validate checks v against the subset of OpenAPI 3.0 schema the spec
// uses: $ref, allOf, type, nullable, required, properties, items, enum;
// and an object's fields against the properties its schema lists (those
// of all its allOf parts together), as a client generated from the spec
// knows only those: a field the spec does not name is one no client reads.
func (d schemaDoc) validate(s map[string]any, v any, at string) []string {
	return d.validatePart(s, v, at, false)
}

// validatePart is validate of s, one part of an allOf when part is true:
// such a part names only some of the object's fields, which the whole
// schema checks.
func (d schemaDoc) validatePart(s map[string]any, v any, at string, part bool) []string {
	s = d.deref(s)
	if s == nil {
		return nil
	}
	if v == nil {
		if n, _ := s["nullable"].(bool); n {
			return nil
		}
		if _, typed := s["type"]; typed {
			return []string{at + " is null, and the schema is not nullable"}
		}
	}
	var out []string
	if obj, ok := v.(map[string]any); ok && !part {
		out = append(out, d.unnamedFields(s, obj, at)...)
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			m, _ := sub.(map[string]any)
			if v == nil && s["nullable"] == true {
				continue
			}
			out = append(out, d.validatePart(m, v, at, true)...)
		}
	}
	if enum, ok := s["enum"].([]any); ok && v != nil {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("%s is %v, not one of %v", at, v, enum))
		}
	}
	switch s["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return append(out, fmt.Sprintf("%s is %T, want an object", at, v))
		}
		if req, ok := s["required"].([]any); ok {
			for _, name := range req {
				if _, ok := obj[name.(string)]; !ok {
					out = append(out, fmt.Sprintf("%s lacks required %q", at, name))
				}
			}
		}
		props, _ := s["properties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if ps, ok := props[k].(map[string]any); ok {
				out = append(out, d.validate(ps, obj[k], at+"."+k)...)
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return append(out, fmt.Sprintf("%s is %T, want an array", at, v))
		}
		items, _ := s["items"].(map[string]any)
		for i, e := range arr {
			out = append(out, d.validate(items, e, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) {
			out = append(out, fmt.Sprintf("%s is %v, want an integer", at, v))
		}
	case "string":
		if _, ok := v.(string); !ok {
			out = append(out, fmt.Sprintf("%s is %T, want a string", at, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			out = append(out, fmt.Sprintf("%s is %T, want a boolean", at, v))
		}
	}
	return out
}

// specCase is one HTTP request and the route pattern the spec lists it under.
type specCase struct {
	user    int64
	method  string
	pattern string
	path    string
	body    any
}

// TestOpenAPIAnswersMatchTheSpec sends requests to most routes, successes
// and refusals, and checks each answer as a client generated from
// docs/openapi.yaml would read it: a status the operation lists, and a body
// with the documented required fields, types and nullability.
func TestOpenAPIAnswersMatchTheSpec(t *testing.T) {
	doc := loadSchemaDoc(t)
	f := newFixture(t)
	g, d := f.g, f.d
	f.must(200, owner, "PUT", "/v1/me", map[string]any{"displayName": "Ann"}, nil)
	f.sendMsg(owner, d, newID(), "hi")
	// The device store chatd always runs with (server.startPush).
	f.svc.Push = push.NewDevices(f.pool, "BKey", true, false)
	cases := []specCase{
		{owner, "POST", "/v1/conversations", "/v1/conversations", map[string]any{"type": "group", "title": "t", "members": []int64{2}}},
		{owner, "POST", "/v1/conversations", "/v1/conversations", map[string]any{"type": "direct"}},
		{owner, "POST", "/v1/direct/{peerId}", pathf("/v1/direct/%d", member), nil},
		{owner, "POST", "/v1/direct/{peerId}", "/v1/direct/x", nil},
		{owner, "GET", "/v1/conversations/{id}", pathf("/v1/conversations/%d", g), nil},
		{owner, "GET", "/v1/conversations/{id}", pathf("/v1/conversations/%d", d), nil},
		{outsider, "GET", "/v1/conversations/{id}", pathf("/v1/conversations/%d", g), nil},
		{owner, "GET", "/v1/conversations/{id}", "/v1/conversations/99999", nil},
		{owner, "PATCH", "/v1/conversations/{id}", pathf("/v1/conversations/%d", g), map[string]any{"about": "a group"}},
		{owner, "GET", "/v1/conversations/{id}/members", pathf("/v1/conversations/%d/members", g), nil},
		{owner, "POST", "/v1/conversations/{id}/members", pathf("/v1/conversations/%d/members", g), map[string]any{"userId": 5}},
		{owner, "POST", "/v1/conversations/{id}/members", pathf("/v1/conversations/%d/members", g), map[string]any{"userId": 5}},
		{owner, "PUT", "/v1/conversations/{id}/members/{userId}/role", pathf("/v1/conversations/%d/members/5/role", g), map[string]any{"role": "admin"}},
		{owner, "DELETE", "/v1/conversations/{id}/members/{userId}", pathf("/v1/conversations/%d/members/5", g), nil},
		{owner, "POST", "/v1/conversations/{id}/messages", pathf("/v1/conversations/%d/messages", g), map[string]any{"clientMsgId": newID(), "body": "x", "replyTo": 1}},
		{owner, "GET", "/v1/conversations/{id}/messages", pathf("/v1/conversations/%d/messages", g), nil},
		{owner, "GET", "/v1/conversations/{id}/messages", pathf("/v1/conversations/%d/messages?afterSeq=0&limit=500", g), nil},
		{owner, "GET", "/v1/conversations/{id}/messages", pathf("/v1/conversations/%d/messages?limit=x", g), nil},
		{owner, "PATCH", "/v1/conversations/{id}/messages/{seq}", pathf("/v1/conversations/%d/messages/1", g), map[string]any{"clientMsgId": newID(), "body": "edited"}},
		{owner, "PUT", "/v1/conversations/{id}/messages/{seq}/reactions/{emoji}", pathf("/v1/conversations/%d/messages/1/reactions/%%F0%%9F%%91%%8D", g), nil},
		{owner, "DELETE", "/v1/conversations/{id}/messages/{seq}/reactions/{emoji}", pathf("/v1/conversations/%d/messages/1/reactions/%%F0%%9F%%91%%8D", g), nil},
		{owner, "POST", "/v1/conversations/{id}/read", pathf("/v1/conversations/%d/read", g), map[string]any{"seq": 1}},
		{owner, "GET", "/v1/conversations/{id}/messages/{seq}/seen", pathf("/v1/conversations/%d/messages/1/seen", g), nil},
		{owner, "DELETE", "/v1/conversations/{id}/messages/{seq}", pathf("/v1/conversations/%d/messages/1", g), nil},
		{owner, "PUT", "/v1/conversations/{id}/settings", pathf("/v1/conversations/%d/settings", g), map[string]any{"muted": true}},
		{owner, "GET", "/v1/inbox", "/v1/inbox", nil},
		{admin, "GET", "/v1/inbox", "/v1/inbox?limit=1", nil},
		{owner, "GET", "/v1/users/{id}/presence", pathf("/v1/users/%d/presence", member), nil},
		{owner, "GET", "/v1/me", "/v1/me", nil},
		{owner, "PUT", "/v1/me", "/v1/me", map[string]any{"displayName": "Ann", "about": "hi"}},
		{owner, "GET", "/v1/me/settings", "/v1/me/settings", nil},
		{owner, "PUT", "/v1/me/settings", "/v1/me/settings", map[string]any{"presence": true}},
		{owner, "PUT", "/v1/me/blocks/{userId}", "/v1/me/blocks/9", nil},
		{owner, "GET", "/v1/me/blocks", "/v1/me/blocks", nil},
		{owner, "DELETE", "/v1/me/blocks/{userId}", "/v1/me/blocks/9", nil},
		{owner, "GET", "/v1/users/{id}", pathf("/v1/users/%d", member), nil},
		{owner, "GET", "/v1/users/{id}", pathf("/v1/users/%d", owner), nil},
		{owner, "GET", "/v1/users", "/v1/users?ids=1,2", nil},
		{owner, "GET", "/v1/search", "/v1/search?q=hello", nil},
		{owner, "POST", "/v1/devices", "/v1/devices", map[string]any{"platform": "webpush", "endpoint": "https://push.example/a",
			"keys": map[string]string{"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}}},
		{owner, "GET", "/v1/devices", "/v1/devices", nil},
		{owner, "DELETE", "/v1/devices/{id}", "/v1/devices/77", nil},
		{owner, "GET", "/v1/push/vapid", "/v1/push/vapid", nil},
		{owner, "POST", "/v1/uploads", "/v1/uploads", map[string]any{"conversationId": g, "name": "a.jpg", "contentType": "image/jpeg", "size": 10}},
		{owner, "GET", "/v1/uploads/{id}", "/v1/uploads/aaaaaaaaaaaaaaaaaaaaaaaaaa", nil},
		{owner, "GET", "/v1/attachments/{id}", "/v1/attachments/aaaaaaaaaaaaaaaaaaaaaaaaaa", nil},
		{owner, "POST", "/v1/conversations/{id}/owner", pathf("/v1/conversations/%d/owner", g), map[string]any{"userId": admin}},
		{0, "GET", "/v1/inbox", "/v1/inbox", nil},
		{0, "GET", "/healthz", "/healthz", nil},
		{0, "GET", "/readyz", "/readyz", nil},
	}
	for _, c := range cases {
		r := f.do(c.user, c.method, c.path, c.body)
		doc.check(t, c.method, c.pattern, r.status, r.body)
	}

	// Refusals that need a set-up of their own, each with the status
	// docs/http.md gives it: the spec must list them too.
	refused := func(user int64, method, pattern, path string, status int, opts ...reqOpt) {
		t.Helper()
		r := f.do(user, method, path, nil, opts...)
		if r.status != status {
			t.Errorf("%s %s: status %d, want %d; body %s", method, path, r.status, status, truncate(r.body))
		}
		doc.check(t, method, pattern, r.status, r.body)
	}
	// Opening the direct conversation with someone who blocked you.
	f.must(http.StatusNoContent, 9, "PUT", pathf("/v1/me/blocks/%d", owner), nil, nil)
	refused(owner, "POST", "/v1/direct/{peerId}", "/v1/direct/9", http.StatusForbidden)
	// Removing a reaction with an Idempotency-Key used for another change.
	key := withHeader("Idempotency-Key", newID())
	reactions := pathf("/v1/conversations/%d/messages/%d/reactions/", g, f.sendMsg(owner, g, newID(), "react").Seq)
	f.must(http.StatusOK, owner, "PUT", reactions+"a", nil, nil)
	refused(owner, "PUT", "/v1/conversations/{id}/messages/{seq}/reactions/{emoji}", reactions+"b", http.StatusOK, key)
	refused(owner, "DELETE", "/v1/conversations/{id}/messages/{seq}/reactions/{emoji}", reactions+"a", http.StatusConflict, key)
}

// TestOpenAPIListsTheRefusalsEveryRouteGives: every /v1 route refuses a
// missing token (401), an unknown query parameter (400) and, when it takes a
// body, one over the size limit (413) and one that is not JSON (415); the
// spec must list each of those answers for each operation, so a generated
// client knows their shape. A PUT, POST or DELETE that takes no body
// refuses one alike. Every route is 503 when an identity provider's
// signing keys cannot be checked.
func TestOpenAPIListsTheRefusalsEveryRouteGives(t *testing.T) {
	doc := loadSchemaDoc(t)
	e := newEnv(t)
	e.group(owner, member)
	wild := strings.NewReplacer("{id}", "1", "{peerId}", "2", "{userId}", "2", "{seq}", "1", "{emoji}", "x")
	for _, r := range routesUnderV1() {
		path := wild.Replace(r.Path)
		if strings.HasPrefix(r.Path, "/v1/uploads/{id}") || strings.HasPrefix(r.Path, "/v1/attachments/{id}") {
			path = strings.Replace(r.Path, "{id}", strings.Repeat("a", 26), 1)
		}
		res := e.do(0, r.Method, path, nil)
		doc.check(t, r.Method, r.Path, res.status, res.body)
		res = e.do(owner, r.Method, path+"?unknown=1", nil)
		doc.check(t, r.Method, r.Path, res.status, res.body)
		// A PUT, POST or DELETE without a JSON body still reads one, to
		// refuse it.
		bodyless := (r.Method == "PUT" || r.Method == "POST" || r.Method == "DELETE") && r.Path != "/v1/uploads/{id}"
		if !doc.takesBody(r.Method, r.Path) && !bodyless {
			continue
		}
		big := `{"x":"` + strings.Repeat("a", 1<<20) + `"}`
		res = e.do(owner, r.Method, path, big)
		if res.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with a body over the limit: status %d, want 413", r.Method, path, res.status)
		}
		doc.check(t, r.Method, r.Path, res.status, res.body)
		res = e.do(owner, r.Method, path, `{}`, withHeader("Content-Type", "text/plain"))
		if res.status != http.StatusUnsupportedMediaType {
			t.Errorf("%s %s with a text/plain body: status %d, want 415", r.Method, path, res.status)
		}
		doc.check(t, r.Method, r.Path, res.status, res.body)
	}
	// A token of an identity provider whose signing keys cannot be
	// checked now is 503 on every route, before the route runs.
	keysDown := func(string) (int64, time.Time, error) {
		return 0, time.Time{}, chat.Errorf(chat.CodeUnavailable, "the identity provider's keys cannot be fetched")
	}
	srv := httptest.NewServer(httpapi.New(e.svc, keysDown, nil, nil).Handler())
	t.Cleanup(srv.Close)
	for _, r := range routesUnderV1() {
		path := wild.Replace(r.Path)
		req, err := http.NewRequest(r.Method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.token(owner))
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.Method, path, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("read body: %v", err)
		}
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the signing keys down: status %d, want 503", r.Method, path, res.StatusCode)
		}
		doc.check(t, r.Method, r.Path, res.StatusCode, body)
	}
}

// takesBody reports whether the spec gives an operation a JSON request body.
func (d schemaDoc) takesBody(method, path string) bool {
	paths, _ := d.root["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	rb, _ := op["requestBody"].(map[string]any)
	content, _ := rb["content"].(map[string]any)
	_, ok := content["application/json"]
	return ok
}

// TestEveryRPCMethodHasADocumentedPayloadThatDecodes: the RPC table of
// docs/http.md lists every method with an example payload, and each
// example decodes (no unknown field, no wrong type): the RPC names of path
// parameters ("userId" for GET /v1/users/{id}) and the shape of query ones
// (users.get's ids as an array) are not guessable from the HTTP routes.
func TestEveryRPCMethodHasADocumentedPayloadThatDecodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(b), "| method | payload | HTTP equivalent |")
	row := regexp.MustCompile("(?m)^\\| `([a-z.]+)` \\| `([^`]*)`")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		documented[m[1]] = m[2]
	}
	e := newEnv(t)
	e.group(owner, member)
	decodeErr := regexp.MustCompile(`^(unknown field|field "|malformed JSON|request body)`)
	for _, method := range httpapi.RPCMethods() {
		payload, ok := documented[method]
		if !ok {
			t.Errorf("RPC method %s has no row in the RPC table of docs/http.md", method)
			continue
		}
		payload = strings.NewReplacer("<uuid>", newID(), `"..."`, `"`+strings.Repeat("a", 26)+`"`).Replace(payload)
		rr := e.rpc(owner, method, payload)
		var body struct {
			Error *httpapi.ErrorDetail `json:"error"`
		}
		decodeInto(t, rr.raw, &body)
		if body.Error != nil && body.Error.Code == "invalid" && decodeErr.MatchString(body.Error.Message) {
			t.Errorf("RPC %s with the documented payload %s: %s", method, payload, rr.raw)
		}
	}
}

// unnamedFields lists the fields of obj that its object schema s does not
// name, in its properties or those of its allOf parts; nothing for a
// schema that is no object's or that takes any field (a map, whose
// additionalProperties is a schema).
func (d schemaDoc) unnamedFields(s map[string]any, obj map[string]any, at string) []string {
	named, isObject := d.fieldNames(s)
	if !isObject {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !named[k] {
			out = append(out, fmt.Sprintf("%s.%s is a field the spec does not name", at, k))
		}
	}
	return out
}

// fieldNames returns the property names of object schema s and of its
// allOf parts, and whether s is an object's schema with fixed fields.
func (d schemaDoc) fieldNames(s map[string]any) (map[string]bool, bool) {
	s = d.deref(s)
	if _, isMap := s["additionalProperties"].(map[string]any); isMap {
		return nil, false
	}
	named := map[string]bool{}
	props, isObject := s["properties"].(map[string]any)
	isObject = isObject || s["type"] == "object"
	for k := range props {
		named[k] = true
	}
	all, _ := s["allOf"].([]any)
	for _, sub := range all {
		m, _ := sub.(map[string]any)
		names, ok := d.fieldNames(m)
		if !ok {
			return nil, false
		}
		isObject = true
		for k := range names {
			named[k] = true
		}
	}
	return named, isObject
}
