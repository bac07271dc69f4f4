package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/strictjson"
)

// People and groups: profiles, privacy settings, blocks, group settings,
// roles and ownership, and search (docs/http.md "People and groups").

func getMe(a *API, ctx context.Context, user int64, _ noParams) (int, any, error) {
	return okReply(a.svc.Me(ctx, user))
}

// profileParams: PUT /v1/me and RPC me.update. AvatarURL and About absent
// keep what is stored; "" clears them. AvatarUploadID makes an avatar
// upload the avatar.
type profileParams struct {
	DisplayName    string  `json:"displayName"`
	AvatarURL      *string `json:"avatarUrl"`
	AvatarUploadID *string `json:"avatarUploadId"`
	About          *string `json:"about"`
}

func bindProfile(a *API, w http.ResponseWriter, r *http.Request, p *profileParams) error {
	return a.bindBody(w, r, p)
}

func setMe(a *API, ctx context.Context, user int64, p profileParams) (int, any, error) {
	return okReply(a.svc.SetProfile(ctx, user, chat.ProfileUpdate{DisplayName: p.DisplayName, AvatarURL: p.AvatarURL,
		AvatarUploadID: p.AvatarUploadID, About: p.About}))
}

func getUserSettings(a *API, ctx context.Context, user int64, _ noParams) (int, any, error) {
	return okReply(a.svc.Settings(ctx, user))
}

// userSettingsParams: PUT /v1/me/settings and RPC settings.update; absent
// settings are unchanged.
type userSettingsParams struct {
	ReadReceipts *bool `json:"readReceipts"`
	Presence     *bool `json:"presence"`
}

func bindUserSettings(a *API, w http.ResponseWriter, r *http.Request, p *userSettingsParams) error {
	return a.bindBody(w, r, p)
}

func setUserSettings(a *API, ctx context.Context, user int64, p userSettingsParams) (int, any, error) {
	return okReply(a.svc.SetSettings(ctx, user, chat.SettingsUpdate{ReadReceipts: p.ReadReceipts, Presence: p.Presence}))
}

// BlocksReply lists the users the caller blocked, newest first.
type BlocksReply struct {
	Blocked []chat.Block `json:"blocked"`
}

// revokeTokens: POST /v1/me/tokens/revoke and RPC tokens.revoke sign the
// caller out everywhere (chat.Service.RevokeTokens).
func revokeTokens(a *API, ctx context.Context, user int64, _ noParams) (int, any, error) {
	return okReply(a.svc.RevokeTokens(ctx, user))
}

func listBlocks(a *API, ctx context.Context, user int64, _ noParams) (int, any, error) {
	bs, err := a.svc.Blocks(ctx, user)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, BlocksReply{Blocked: bs}, nil
}

// userParams: a user id in the path (RPC userId).
type userParams struct {
	UserID int64 `json:"userId"`
}

func bindUserID(name string) func(*API, http.ResponseWriter, *http.Request, *userParams) error {
	return func(a *API, w http.ResponseWriter, r *http.Request, p *userParams) error {
		var err error
		if p.UserID, err = pathID(r, name, "userId"); err != nil {
			return err
		}
		return a.bindNoBody(w, r)
	}
}

func block(a *API, ctx context.Context, user int64, p userParams) (int, any, error) {
	return http.StatusNoContent, nil, a.svc.Block(ctx, user, p.UserID)
}

func unblock(a *API, ctx context.Context, user int64, p userParams) (int, any, error) {
	return http.StatusNoContent, nil, a.svc.Unblock(ctx, user, p.UserID)
}

// getUser answers one profile, with presence when the caller may see it:
// 404 for users who share no conversation with the caller.
func getUser(a *API, ctx context.Context, user int64, p userParams) (int, any, error) {
	return okReply(a.svc.Profile(ctx, user, p.UserID))
}

// usersParams: GET /v1/users?ids=1,2,3 and RPC users.get {"ids":[1,2,3]}.
type usersParams struct {
	IDs []int64 `json:"ids"`
}

func bindUsers(_ *API, _ http.ResponseWriter, r *http.Request, p *usersParams) error {
	raw := queryOf(r).str("ids")
	if raw == "" {
		return chat.Errorf(chat.CodeInvalid, "ids is missing: give 1 to %d user ids, comma-separated", chat.MaxUsersPerRequest)
	}
	parts := strings.Split(raw, ",")
	if len(parts) > chat.MaxUsersPerRequest {
		return chat.Errorf(chat.CodeInvalid, "at most %d user ids per request", chat.MaxUsersPerRequest)
	}
	for _, s := range parts {
		// Untrimmed: a "+" in a query is a space, and "?ids=+1" is no
		// more user 1 than the path /v1/users/+1 is.
		id, ok := parseUint(s)
		if !ok || id <= 0 {
			return chat.Errorf(chat.CodeInvalid, "ids must be positive integers in plain decimal, comma-separated (no spaces or signs): %q is not", strictjson.Clip(s))
		}
		p.IDs = append(p.IDs, id)
	}
	return nil
}

// UsersReply is a batch of profiles: those of the ids asked that the
// caller may see, in the order asked (others are left out). It carries no
// presence, so that it can be cached: its ETag is a digest of the body,
// and a request with If-None-Match naming it is answered 304.
type UsersReply struct {
	Users []chat.Profile `json:"users"`
}

// ETag is a strong validator of the reply's JSON.
func (u UsersReply) ETag() string {
	b, _ := json.Marshal(u)
	sum := sha256.Sum256(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
}

func getUsers(a *API, ctx context.Context, user int64, p usersParams) (int, any, error) {
	ps, err := a.svc.Profiles(ctx, user, p.IDs)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, UsersReply{Users: ps}, nil
}

// cacheable is a reply with an entity tag (serveEndpoint answers 304 when
// the request's If-None-Match names it).
type cacheable interface{ ETag() string }

// notModified sets the ETag of v and reports whether the request already
// holds it. Such replies may be kept by the browser, never by a shared
// cache, and revalidated every time.
func notModified(w http.ResponseWriter, r *http.Request, v any) bool {
	c, ok := v.(cacheable)
	if !ok {
		return false
	}
	tag := c.ETag()
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "private, no-cache")
	for _, t := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t = strings.TrimSpace(t); t == tag || t == "*" || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}

// groupParams: PATCH /v1/conversations/{id} and RPC conversation.update.
type groupParams struct {
	ConversationID int64 `json:"conversationId"`
	chat.GroupUpdate
}

func bindGroup(a *API, w http.ResponseWriter, r *http.Request, p *groupParams) error {
	return a.bindConversationBody(w, r, &p.ConversationID, &p.GroupUpdate)
}

func updateGroup(a *API, ctx context.Context, user int64, p groupParams) (int, any, error) {
	return okReply(a.svc.UpdateGroup(ctx, p.ConversationID, user, p.GroupUpdate))
}

// membersParams: GET /v1/conversations/{id}/members and RPC members.list.
type membersParams struct {
	ConversationID int64  `json:"conversationId"`
	Limit          int    `json:"limit"`
	Cursor         string `json:"cursor"`
}

func bindMembers(_ *API, _ http.ResponseWriter, r *http.Request, p *membersParams) error {
	err := pathConversation(r, &p.ConversationID)
	if err != nil {
		return err
	}
	p.Limit, p.Cursor, err = pageQuery(r)
	return err
}

func listMembers(a *API, ctx context.Context, user int64, p membersParams) (int, any, error) {
	return okReply(a.svc.MembersPage(ctx, p.ConversationID, user, p.Limit, p.Cursor))
}

// roleParams: PUT /v1/conversations/{id}/members/{userId}/role and RPC
// members.role.
type roleParams struct {
	ConversationID int64 `json:"conversationId"`
	UserID         int64 `json:"userId"`
	roleBody
}

// roleBody is a member's role in a request body.
type roleBody struct {
	Role chat.Role `json:"role"`
}

func bindRole(a *API, w http.ResponseWriter, r *http.Request, p *roleParams) error {
	if err := pathConversationAnd(r, &p.ConversationID, "userId", &p.UserID); err != nil {
		return err
	}
	return a.bindBody(w, r, &p.roleBody)
}

func setRole(a *API, ctx context.Context, user int64, p roleParams) (int, any, error) {
	return okReply(a.svc.SetRole(ctx, p.ConversationID, user, p.UserID, p.Role))
}

func bindOwner(a *API, w http.ResponseWriter, r *http.Request, p *memberParams) error {
	return a.bindConversationBody(w, r, &p.ConversationID, &p.userBody)
}

func transferOwner(a *API, ctx context.Context, user int64, p memberParams) (int, any, error) {
	return http.StatusNoContent, nil, a.svc.TransferOwnership(ctx, p.ConversationID, user, p.UserID)
}

// searchParams: GET /v1/search and RPC search. Before and After are RFC
// 3339 times.
type searchParams struct {
	Q string `json:"q"`
	chat.SearchFilter
}

func bindSearch(_ *API, _ http.ResponseWriter, r *http.Request, p *searchParams) error {
	q := queryOf(r)
	var err error
	p.Q, p.Cursor = q.str("q"), q.str("cursor")
	if p.ConversationID, err = q.int64("conversationId"); err != nil {
		return err
	}
	if p.SenderID, err = q.int64("senderId"); err != nil {
		return err
	}
	if p.Limit, err = q.int("limit"); err != nil {
		return err
	}
	// In a fixed order: two bad times are answered alike every time.
	for _, f := range []struct {
		name string
		dst  **time.Time
	}{{"before", &p.Before}, {"after", &p.After}} {
		name, dst := f.name, f.dst
		if s := q.str(name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return chat.Errorf(chat.CodeInvalid, "%s must be an RFC 3339 time like 2026-03-01T12:00:00Z", name)
			}
			*dst = &t
		}
	}
	return nil
}

func search(a *API, ctx context.Context, user int64, p searchParams) (int, any, error) {
	return okReply(a.svc.Search(ctx, p.Query(user, p.Q)))
}
