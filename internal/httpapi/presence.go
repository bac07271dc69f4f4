package httpapi

import "context"

// userPresence (GET /v1/users/{id}/presence and RPC presence) answers
// {"userId","online","lastSeen"} for a user who shares a conversation with
// the caller (or the caller themself); anyone else is 404, so presence
// cannot be used to probe who exists.
func userPresence(a *API, ctx context.Context, user int64, p userParams) (int, any, error) {
	return okReply(a.svc.Presence(ctx, user, p.UserID))
}
