package httpapi

import (
	"context"
	"net/http"
	"sort"

	chat "github.com/chatd/chatd"
)

// Route is one HTTP route: Method and Path in ServeMux pattern syntax, which
// is also OpenAPI's path syntax, and the RPC method reaching the same
// operation ("" for HTTP-only routes).
type Route struct {
	Method string
	Path   string
	RPC    string
	// Key is what the route does with an Idempotency-Key header.
	Key KeyUse
}

// KeyUse is what a route does with an Idempotency-Key header
// (docs/http.md, "Repeating a request"). A client that sends one believes
// its retry safe: no route takes one and lets that belief be wrong.
type KeyUse int

const (
	// KeyNotNeeded: a GET, or a change a repeat of which does nothing
	// more than the first did, key or not (a read receipt, a PUT that
	// replaces, an add of a member already in). The header is not read.
	KeyNotNeeded KeyUse = iota
	// KeyHonoured: a repeat with the key the first carried answers the
	// first's outcome and does nothing more (over RPC the key is the
	// payload's clientMsgId).
	KeyHonoured
	// KeyRefused: a repeat may do more than the first, which no key can
	// prevent (a token revocation revokes the tokens issued since): the
	// header is 400 invalid, naming it, and nothing is done.
	KeyRefused
)

// endpoints is the route table, the single place that says which operation
// answers which route and RPC method. Routes exposes it so the OpenAPI test
// can compare it with docs/openapi.yaml.
var endpoints = []endpoint{
	operation(http.MethodPost, "/v1/conversations", "conversation.create", bindCreateConversation, createConversation).keyed(),
	operation(http.MethodPost, "/v1/direct/{peerId}", "direct.open", bindOpenDirect, openDirect),
	operation(http.MethodGet, "/v1/conversations/{id}", "conversation.get", bindGetConversation, getConversation),
	operation(http.MethodPost, "/v1/conversations/{id}/members", "members.add", bindAddMember, addMember),
	operation(http.MethodDelete, "/v1/conversations/{id}/members/{userId}", "members.remove", bindRemoveMember, removeMember),
	operation(http.MethodPost, "/v1/conversations/{id}/messages", "send", bindSend, send).keyed(),
	operation(http.MethodGet, "/v1/conversations/{id}/messages", "history", bindHistory, history).takes("beforeSeq", "afterSeq", "limit"),
	operation(http.MethodPatch, "/v1/conversations/{id}/messages/{seq}", "message.edit", bindEdit, editMessage).keyed(),
	operation(http.MethodDelete, "/v1/conversations/{id}/messages/{seq}", "message.recall", bindRecall, recallMessage).keyed(),
	operation(http.MethodPut, "/v1/conversations/{id}/messages/{seq}/reactions/{emoji}", "reaction.set", bindReaction(true), setReaction).keyed(),
	operation(http.MethodDelete, "/v1/conversations/{id}/messages/{seq}/reactions/{emoji}", "", bindReaction(false), setReaction).keyed(),
	operation(http.MethodPost, "/v1/conversations/{id}/read", "read", bindRead, markRead),
	operation(http.MethodGet, "/v1/conversations/{id}/messages/{seq}/seen", "seen", bindSeen, seen),
	operation(http.MethodGet, "/v1/inbox", "inbox", bindInbox, inbox).takes("limit", "cursor"),
	operation(http.MethodGet, "/v1/users/{id}/presence", "presence", bindUserID("id"), userPresence),
	operation(http.MethodPost, "/v1/uploads", "upload.create", bindCreateUpload, createUpload).keyed(),
	operation(http.MethodGet, "/v1/uploads/{id}", "upload.get", bindUploadID, getUpload),
	stream(http.MethodPut, "/v1/uploads/{id}", putUpload),
	operation(http.MethodPost, "/v1/uploads/{id}/complete", "upload.complete", bindUploadID, completeUpload),
	stream(http.MethodGet, "/v1/attachments/{id}", downloadAttachment(false)),
	stream(http.MethodGet, "/v1/attachments/{id}/thumbnail", downloadAttachment(true)),
	operation(http.MethodPut, "/v1/conversations/{id}/settings", "conversation.settings", bindSettings, setSettings),
	operation(http.MethodPost, "/v1/devices", "device.register", bindRegisterDevice, registerDevice),
	operation(http.MethodGet, "/v1/devices", "device.list", bindNone, listDevices),
	operation(http.MethodDelete, "/v1/devices/{id}", "device.delete", bindDeviceID, deleteDevice),
	operation(http.MethodGet, "/v1/push/vapid", "push.vapid", bindNone, vapidKey),
	// People and groups (people.go).
	operation(http.MethodGet, "/v1/me", "me.get", bindNone, getMe),
	operation(http.MethodPut, "/v1/me", "me.update", bindProfile, setMe),
	operation(http.MethodGet, "/v1/me/settings", "settings.get", bindNone, getUserSettings),
	operation(http.MethodPut, "/v1/me/settings", "settings.update", bindUserSettings, setUserSettings),
	operation(http.MethodPost, "/v1/me/tokens/revoke", chat.RPCRevokeTokens, bindNone, revokeTokens).refusesKey(),
	operation(http.MethodGet, "/v1/me/blocks", "blocks.list", bindNone, listBlocks),
	operation(http.MethodPut, "/v1/me/blocks/{userId}", "block", bindUserID("userId"), block),
	operation(http.MethodDelete, "/v1/me/blocks/{userId}", "unblock", bindUserID("userId"), unblock),
	operation(http.MethodGet, "/v1/users", "users.get", bindUsers, getUsers).takes("ids"),
	operation(http.MethodGet, "/v1/users/{id}", "user.get", bindUserID("id"), getUser),
	operation(http.MethodPatch, "/v1/conversations/{id}", "conversation.update", bindGroup, updateGroup),
	operation(http.MethodGet, "/v1/conversations/{id}/members", "members.list", bindMembers, listMembers).takes("limit", "cursor"),
	operation(http.MethodPut, "/v1/conversations/{id}/members/{userId}/role", "members.role", bindRole, setRole),
	operation(http.MethodPost, "/v1/conversations/{id}/owner", "conversation.owner", bindOwner, transferOwner),
	operation(http.MethodGet, "/v1/search", "search", bindSearch, search).takes("q", "conversationId", "senderId", "before", "after", "limit", "cursor"),
	public(http.MethodGet, "/healthz", healthz),
	public(http.MethodGet, "/readyz", readyz),
}

// Routes returns every route the API serves.
func Routes() []Route {
	out := make([]Route, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.Route
	}
	return out
}

// RPCMethods returns the RPC method names, sorted.
func RPCMethods() []string {
	var out []string
	for _, e := range endpoints {
		if e.RPC != "" {
			out = append(out, e.RPC)
		}
	}
	sort.Strings(out)
	return out
}

// endpoint binds one operation to its route and RPC method. Both closures
// end in the same run function; they differ only in where the parameters
// come from.
type endpoint struct {
	Route
	// query names the query parameters the route takes (takes); any
	// other, or one given twice, is refused before the route runs, as an
	// unknown JSON field is.
	query  []string
	public bool // no bearer token needed (health probes)
	// raw endpoints write their own answer (bytes, not JSON); an error
	// returned before they wrote anything is answered as JSON.
	raw   bool
	serve func(a *API, w http.ResponseWriter, r *http.Request, user int64) (int, any, error)
	call  func(a *API, ctx context.Context, user int64, payload []byte) (int, any, error)
}

// takes declares the query parameters a route reads; without it a route
// takes none.
func (e endpoint) takes(names ...string) endpoint {
	e.query = names
	return e
}

// keyed marks a route whose binder reads the Idempotency-Key header and
// honours it (KeyHonoured).
func (e endpoint) keyed() endpoint {
	e.Key = KeyHonoured
	return e
}

// refusesKey marks a route a repeat of which may do more than the first,
// whatever key it carries (KeyRefused).
func (e endpoint) refusesKey() endpoint {
	e.Key = KeyRefused
	return e
}

// name identifies the endpoint in logs.
func (e *endpoint) name() string {
	if e.RPC != "" {
		return e.RPC
	}
	return e.Path
}

// operation builds an endpoint from an operation with parameters P. Over
// HTTP, bind fills P from the path, query and body; over RPC, P is the
// payload, decoded strictly with P's JSON field names.
func operation[P any](method, path, rpc string,
	bind func(a *API, w http.ResponseWriter, r *http.Request, p *P) error,
	run func(a *API, ctx context.Context, user int64, p P) (int, any, error),
) endpoint {
	return endpoint{
		Route: Route{Method: method, Path: path, RPC: rpc},
		serve: func(a *API, w http.ResponseWriter, r *http.Request, user int64) (int, any, error) {
			var p P
			if err := bind(a, w, r, &p); err != nil {
				return 0, nil, err
			}
			return run(a, r.Context(), user, p)
		},
		call: func(a *API, ctx context.Context, user int64, payload []byte) (int, any, error) {
			var p P
			if err := decodeStrict(payload, &p, true); err != nil {
				return 0, nil, err
			}
			return run(a, ctx, user, p)
		},
	}
}

// public builds an unauthenticated, HTTP-only endpoint.
// okReply is an endpoint's answer to a call that returns v or fails: 200
// with v, or err.
func okReply(v any, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, v, nil
}

// createdReply is the answer to a call that may make something: 201 with
// v when it did (created), 200 with v when it was there already, or err.
func createdReply(v any, created bool, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	if created {
		return http.StatusCreated, v, nil
	}
	return http.StatusOK, v, nil
}

func public(method, path string, run func(a *API, ctx context.Context) (int, any, error)) endpoint {
	return endpoint{
		Route:  Route{Method: method, Path: path},
		public: true,
		serve: func(a *API, w http.ResponseWriter, r *http.Request, _ int64) (int, any, error) {
			return run(a, r.Context())
		},
	}
}

// stream builds an authenticated, HTTP-only endpoint that reads or writes
// bytes itself (uploads, downloads).
func stream(method, path string, run func(a *API, w http.ResponseWriter, r *http.Request, user int64) error) endpoint {
	return endpoint{
		Route: Route{Method: method, Path: path},
		raw:   true,
		serve: func(a *API, w http.ResponseWriter, r *http.Request, user int64) (int, any, error) {
			return 0, nil, run(a, w, r, user)
		},
	}
}

// bindBody decodes a required JSON object body into v.
func (a *API) bindBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(b, v, false)
}

// bindNoBody refuses a body on a PUT, POST or DELETE route that takes
// none: empty or {} is accepted (many clients always send one), anything
// else is refused as an unknown field or media type would be, so that a
// body is never silently ignored (PUT .../reactions/{emoji} with
// {"on":false} must not set the reaction; a DELETE of a message with
// {"clientMsgId"} would not be the idempotent request its sender meant:
// the key goes in the Idempotency-Key header).
func (a *API) bindNoBody(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	b, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(b, &struct{}{}, true)
}

// bindConversationBody binds a conversation route whose other parameters
// come in the body: {id} into *conv, the request body into body.
func (a *API) bindConversationBody(w http.ResponseWriter, r *http.Request, conv *int64, body any) error {
	if err := pathConversation(r, conv); err != nil {
		return err
	}
	return a.bindBody(w, r, body)
}
