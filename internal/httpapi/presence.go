package httpapi

import (
	"context"
	"net/http"
)

// presenceParams: GET /v1/users/{id}/presence and RPC presence.
type presenceParams struct {
	UserID int64 `json:"userId"`
}

func bindPresence(_ *API, _ http.ResponseWriter, r *http.Request, p *presenceParams) error {
	var err error
	p.UserID, err = pathID(r, "id", "userId")
	return err
}

// userPresence answers {"userId","online","lastSeen"} for a user who shares
// a conversation with the caller (or the caller themself); anyone else is
// 404, so presence cannot be used to probe who exists.
func userPresence(a *API, ctx context.Context, user int64, p presenceParams) (int, any, error) {
	return okReply(a.svc.Presence(ctx, user, p.UserID))
}
