package httpapi

import (
	"context"
	"net/http"

	chat "github.com/chatd/chatd"
)

// inboxParams: GET /v1/inbox and RPC inbox.
type inboxParams struct {
	Limit  int    `json:"limit"`
	Cursor string `json:"cursor"`
}

func bindInbox(_ *API, _ http.ResponseWriter, r *http.Request, p *inboxParams) error {
	var err error
	p.Limit, p.Cursor, err = pageQuery(r)
	return err
}

// inbox pages the caller's conversations, most recent activity first; the
// cursor is opaque and validated by the Service.
func inbox(a *API, ctx context.Context, user int64, p inboxParams) (int, any, error) {
	page, err := a.svc.Inbox(ctx, user, p.Limit, p.Cursor)
	if err != nil {
		return 0, nil, err
	}
	if page.Conversations == nil {
		page.Conversations = []chat.InboxEntry{} // [] not null
	}
	if err := a.svc.AddInboxSettings(ctx, user, &page); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page, nil
}
