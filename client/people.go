package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	chat "github.com/chatd/chatd"
)

// People and groups: profiles, privacy settings, blocks, group settings,
// roles and ownership, search (docs/http.md "People and groups"). Each is
// one RPC; a method that changes something and is not idempotent says so.

// The people types the server answers with are the server's own.
type (
	// Profile is what others see of a user; DisplayName is empty for a
	// user who never set one. Online and LastSeen are set by User when
	// the caller may see the user's presence.
	Profile = chat.Profile
	// Settings are the user's privacy settings.
	Settings = chat.Settings
	// Me is the user's own profile and settings.
	Me = chat.Me
	// Block is a user the caller blocked.
	Block = chat.Block
	// SearchHit is one message found, with a snippet of its current body
	// and the matches in it as [start, end) offsets in code points.
	SearchHit = chat.SearchHit
	// SearchPage is a page of hits, most relevant then newest first.
	SearchPage = chat.SearchPage
	// Presence is a user's online state: LastSeen is now while Online,
	// the last disconnect otherwise, nil for a user never seen. Hidden:
	// the caller may not see it (the user hides their presence, the
	// caller hides theirs, or the user blocked the caller); Online is
	// then false and LastSeen nil.
	Presence = chat.Presence
)

// ProfileUpdate sets the user's profile: DisplayName is required; nil
// AvatarURL or About keep what is stored, "" clears them. AvatarUploadID
// (not with AvatarURL) makes an upload of UploadAvatar the avatar, whose
// Profile.Avatar is then its path /v1/attachments/{id} (DownloadAvatar).
type ProfileUpdate struct {
	DisplayName    string  `json:"displayName"`
	AvatarURL      *string `json:"avatarUrl,omitempty"`
	AvatarUploadID *string `json:"avatarUploadId,omitempty"`
	About          *string `json:"about,omitempty"`
}

// SettingsUpdate changes the settings given.
type SettingsUpdate struct {
	ReadReceipts *bool `json:"readReceipts,omitempty"`
	Presence     *bool `json:"presence,omitempty"`
}

// GroupUpdate changes the settings given of a group.
type GroupUpdate struct {
	Title          *string `json:"title,omitempty"`
	About          *string `json:"about,omitempty"`
	AvatarURL      *string `json:"avatarUrl,omitempty"`
	AvatarUploadID *string `json:"avatarUploadId,omitempty"` // an upload of UploadAvatar
	HistoryVisible *string `json:"historyVisible,omitempty"` // "joined" or "all"
}

// MembersPage is a page of members, the owner first, then admins, then
// members by join time.
type MembersPage struct {
	Members    []Member `json:"members"`
	NextCursor string   `json:"nextCursor"`
}

// SearchOptions narrow a search: ConversationID and SenderID 0 mean any;
// Limit defaults to 20 (at most 50); Cursor is a page's NextCursor.
type SearchOptions = chat.SearchFilter

// Me returns the user's profile and settings.
func (c *Client) Me(ctx context.Context) (Me, error) {
	return callFor[Me](ctx, c, "me.get", struct{}{}, true)
}

// SetProfile stores the user's profile; the users who share a
// conversation with them get profile.updated.
func (c *Client) SetProfile(ctx context.Context, u ProfileUpdate) (Profile, error) {
	return callFor[Profile](ctx, c, "me.update", u, true)
}

// DownloadAvatar writes an avatar chatd keeps, a Profile's or a
// Conversation's Avatar that is a path (/v1/attachments/{id}), or its
// thumbnail, to w (as Download). An https avatar is not chatd's to serve:
// invalid, fetch it yourself. An avatar replaced or removed since it was
// read is ErrGone at once (not retried): read the profile (User) or the
// conversation again for the current one; one the caller may no longer
// see is ErrNotFound.
func (c *Client) DownloadAvatar(ctx context.Context, avatar string, thumbnail bool, w io.Writer) (DownloadInfo, error) {
	id, ok := chat.AvatarUploadOf(avatar)
	if !ok {
		return DownloadInfo{}, &Error{Op: "download", Code: "invalid", Message: fmt.Sprintf("avatar %q is not one chatd keeps", avatar)}
	}
	if thumbnail {
		return c.DownloadThumbnail(ctx, id, w)
	}
	return c.Download(ctx, id, w)
}

// User returns one user's profile: ErrNotFound unless they share a
// conversation with the caller.
func (c *Client) User(ctx context.Context, userID int64) (Profile, error) {
	return callFor[Profile](ctx, c, "user.get", struct {
		UserID int64 `json:"userId"`
	}{userID}, true)
}

// Presence returns a user's online state (RPC presence, see docs/http.md
// "GET /v1/users/{id}/presence"), the same on every node: allowed for the
// caller themself and for a user who shares a conversation with the
// caller (large groups included); anyone else is ErrNotFound, as if the
// user did not exist. Changes come as presence events, which are not
// replayed: ask again after a reconnect.
func (c *Client) Presence(ctx context.Context, userID int64) (Presence, error) {
	return callFor[Presence](ctx, c, "presence", userIDParams{userID}, true)
}

// Users returns the profiles of the ids the caller may see, in the order
// asked (an id asked twice answers once, where first asked); others are
// left out. chatd answers at most chat.MaxUsersPerRequest (100) ids per
// request: more are asked in as many requests (RPC users.get), each
// counting against the API rate limit, and the first refusal is the error.
func (c *Client) Users(ctx context.Context, ids []int64) ([]Profile, error) {
	ids = uniqueIDs(ids)
	var out []Profile
	for start := 0; start == 0 || start < len(ids); start += chat.MaxUsersPerRequest {
		var reply struct {
			Users []Profile `json:"users"`
		}
		err := c.call(ctx, "users.get", struct {
			IDs []int64 `json:"ids"`
		}{ids[start:min(start+chat.MaxUsersPerRequest, len(ids))]}, &reply, true)
		if err != nil {
			return nil, err
		}
		out = append(out, reply.Users...)
	}
	return out, nil
}

// uniqueIDs is ids without repeats, each where it first appears, as chatd
// answers them: spread over several requests, a repeat would be answered
// twice.
func uniqueIDs(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Settings returns the user's privacy settings.
func (c *Client) Settings(ctx context.Context) (Settings, error) {
	return callFor[Settings](ctx, c, "settings.get", struct{}{}, true)
}

// SetSettings changes privacy settings and returns them all.
func (c *Client) SetSettings(ctx context.Context, u SettingsUpdate) (Settings, error) {
	return callFor[Settings](ctx, c, "settings.update", u, true)
}

type userIDParams struct {
	UserID int64 `json:"userId"`
}

// Block blocks a user (idempotent).
func (c *Client) Block(ctx context.Context, userID int64) error {
	return c.call(ctx, "block", userIDParams{userID}, nil, true)
}

// Unblock lifts a block (idempotent).
func (c *Client) Unblock(ctx context.Context, userID int64) error {
	return c.call(ctx, "unblock", userIDParams{userID}, nil, true)
}

// Blocks lists the users the caller blocked, newest first.
func (c *Client) Blocks(ctx context.Context) ([]Block, error) {
	var reply struct {
		Blocked []Block `json:"blocked"`
	}
	err := c.call(ctx, "blocks.list", struct{}{}, &reply, true)
	return reply.Blocked, err
}

// UpdateGroup changes a group's settings (owner or admin; historyVisible
// the owner) and returns the conversation as it is now.
func (c *Client) UpdateGroup(ctx context.Context, conversationID int64, u GroupUpdate) (Conversation, error) {
	params := struct {
		ConversationID int64 `json:"conversationId"`
		GroupUpdate
	}{conversationID, u}
	return callFor[Conversation](ctx, c, "conversation.update", params, true)
}

// AddAdmin adds user to a group as an admin (the owner only).
func (c *Client) AddAdmin(ctx context.Context, conversationID, user int64) (Member, error) {
	return callFor[Member](ctx, c, "members.add", roleParams{conversationID, user, "admin"}, true)
}

// roleParams name a member of a conversation and a role for them.
type roleParams struct {
	ConversationID int64  `json:"conversationId"`
	UserID         int64  `json:"userId"`
	Role           string `json:"role"`
}

// SetRole makes a member an admin or a plain member ("admin", "member"):
// the owner only.
func (c *Client) SetRole(ctx context.Context, conversationID, user int64, role string) (Member, error) {
	return callFor[Member](ctx, c, "members.role", roleParams{conversationID, user, role}, true)
}

// TransferOwnership makes user the owner and the caller an admin. Asked
// again after a lost reply: chatd answers the previous owner's repeated
// transfer as the first.
func (c *Client) TransferOwnership(ctx context.Context, conversationID, user int64) error {
	return c.call(ctx, "conversation.owner", memberParams{conversationID, user}, nil, true)
}

// Members returns a page of a conversation's members; cursor is "" for
// the first page.
func (c *Client) Members(ctx context.Context, conversationID int64, limit int, cursor string) (MembersPage, error) {
	return callFor[MembersPage](ctx, c, "members.list", struct {
		ConversationID int64  `json:"conversationId"`
		Limit          int    `json:"limit,omitempty"`
		Cursor         string `json:"cursor,omitempty"`
	}{conversationID, limit, cursor}, true)
}

// Search finds messages the user may read (see docs/http.md "Search").
func (c *Client) Search(ctx context.Context, q string, o SearchOptions) (SearchPage, error) {
	params := struct {
		Q string `json:"q"`
		SearchOptions
	}{q, o}
	return callFor[SearchPage](ctx, c, "search", params, true)
}

// SystemText describes a system entry (a system.new event) for people,
// e.g. `user 1 renamed the group to "Trip"`. name turns a user id into
// what to show (nil: "user N").
func SystemText(ev Event, name func(int64) string) string {
	if name == nil {
		name = func(id int64) string { return fmt.Sprintf("user %d", id) }
	}
	actor, user := name(ev.ActorID), name(ev.UserID)
	switch ev.Action {
	case "group.updated":
		var parts []string
		if ev.Title != "" {
			parts = append(parts, fmt.Sprintf("renamed the group to %q", ev.Title))
		}
		if ev.About != "" {
			parts = append(parts, "changed the group's description")
		}
		if ev.Avatar != "" {
			parts = append(parts, "changed the group's picture")
		}
		if ev.HistoryVisible == "all" {
			parts = append(parts, "let new members read the whole history")
		} else if ev.HistoryVisible == "joined" {
			parts = append(parts, "let new members read from when they join")
		}
		if len(parts) == 0 {
			parts = append(parts, "changed the group")
		}
		return actor + " " + strings.Join(parts, " and ")
	case "member.added":
		if ev.Role == "admin" {
			return fmt.Sprintf("%s added %s as an admin", actor, user)
		}
		return fmt.Sprintf("%s added %s", actor, user)
	case "member.removed":
		return fmt.Sprintf("%s removed %s", actor, user)
	case "member.left":
		return user + " left"
	case "role.changed":
		if ev.Role == "admin" {
			return fmt.Sprintf("%s made %s an admin", actor, user)
		}
		return fmt.Sprintf("%s made %s a member", actor, user)
	case "owner.changed":
		if ev.ActorID == ev.UserID {
			return user + " owns the group now"
		}
		return fmt.Sprintf("%s owns the group now (from %s)", user, actor)
	}
	return fmt.Sprintf("%s changed the group (%s)", actor, ev.Action)
}

// SystemText describes a system entry read from history (SystemText).
func (m Message) SystemText(name func(int64) string) string {
	return SystemText(messageEvent(m), name)
}

// RevokeTokens signs the user out everywhere (RPC tokens.revoke, see
// docs/http.md "Signing out everywhere"): every token of theirs issued
// before the instant returned, this client's own included, is refused
// from then on, and chatd closes the connections they authenticated, this
// one too. A client with a static Token stops there (Err matches
// ErrUnauthorized: make a new client once signed in again); one with
// TokenFunc connects again with the next token, accepted once it is
// issued at or after the instant.
//
// chatd closes this connection right after the answer. When the
// connection is lost before the answer arrives (the network), the next
// connection tells whether the revocation happened, and RevokeTokens asks
// again only if it did not: a static Token refused on reconnecting proves
// it (a nil error with the zero instant: chatd's answer is lost), and one
// accepted disproves it. With TokenFunc, whose next token is accepted
// either way, RevokeTokens reads the user's revocation instant (Me's
// TokensRevokedBefore) before the call and after the reconnection: a later
// one is the revocation, returned as the instant. A revocation that chatd
// was still running when the instant was read again (a very slow
// database) may be made twice, the later instant then also refusing
// what signed in between (this client connects again by itself). When ctx
// ends before the outcome is known, or chatd does not tell the instant (a
// version before it did), the error matches ErrUnavailable and says so. A call once the static Token is refused fails with
// ErrUnauthorized: it cannot revoke what was issued since (chatctl
// revoke-tokens can).
func (c *Client) RevokeTokens(ctx context.Context) (time.Time, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	var before instant // before the call (TokenFunc)
	if c.cfg.TokenFunc != nil {
		var err error
		if before, err = c.revocationInstant(ctx); err != nil {
			return time.Time{}, fmt.Errorf("revoke tokens: read the revocation instant: %w", err)
		}
	}
	for {
		r, err := callFor[chat.TokensRevoked](ctx, c, chat.RPCRevokeTokens, struct{}{}, false)
		if !errors.Is(err, errConnectionLost) {
			return r.RevokedBefore, err
		}
		done, at, err := c.revoked(ctx, before)
		if done || err != nil {
			return at, err
		}
	}
}

// instant is a user's revocation instant as me.get tells it.
type instant struct {
	at    *time.Time // nil: never revoked
	known bool       // false: chatd does not say (a version before it did)
}

// revocationInstant reads the user's revocation instant (Me's
// TokensRevokedBefore, telling a null from an absent one).
func (c *Client) revocationInstant(ctx context.Context) (instant, error) {
	var reply map[string]json.RawMessage
	if err := c.call(ctx, "me.get", struct{}{}, &reply, true); err != nil {
		return instant{}, err
	}
	raw, ok := reply["tokensRevokedBefore"]
	if !ok {
		return instant{}, nil
	}
	var at *time.Time
	if err := json.Unmarshal(raw, &at); err != nil {
		return instant{}, fmt.Errorf("decode me.get reply: %w", err)
	}
	return instant{at: at, known: true}, nil
}

// revoked tells, once a tokens.revoke lost its answer with its
// connection, whether the revocation happened (at: its instant when
// known), by connecting again (see RevokeTokens); before is the instant
// read before the call (TokenFunc only).
func (c *Client) revoked(ctx context.Context, before instant) (done bool, at time.Time, err error) {
	unknown := func(err error) error {
		return fmt.Errorf("revoke tokens: %w: whether the revocation happened is unknown: %w", errConnectionLost, err)
	}
	if c.cfg.TokenFunc == nil {
		_, err := c.ready(ctx)
		switch {
		case errors.Is(err, ErrUnauthorized):
			return true, time.Time{}, nil
		case err != nil:
			return true, time.Time{}, unknown(c.waitErr("rpc "+chat.RPCRevokeTokens, err))
		}
		return false, time.Time{}, nil
	}
	if !before.known {
		return true, time.Time{}, unknown(errors.New("chatd does not tell the revocation instant (GET /v1/me tokensRevokedBefore)"))
	}
	now, err := c.revocationInstant(ctx)
	if err != nil {
		return true, time.Time{}, unknown(err)
	}
	if now.at != nil && (before.at == nil || now.at.After(*before.at)) {
		return true, *now.at, nil
	}
	return false, time.Time{}, nil
}
