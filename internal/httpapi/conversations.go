package httpapi

import (
	"context"
	"net/http"
	"strings"

	chat "github.com/chatd/chatd"
)

// createParams: RPC conversation.create, whose optional clientMsgId is
// the Idempotency-Key header of POST /v1/conversations, whose body is the
// rest (newGroup).
type createParams struct {
	newGroup
	ClientMsgID string `json:"clientMsgId"`
}

// newGroup is POST /v1/conversations's body.
type newGroup struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Members []int64 `json:"members"`
}

func bindCreateConversation(a *API, w http.ResponseWriter, r *http.Request, p *createParams) error {
	var err error
	if p.ClientMsgID, err = idempotencyHeader(r); err != nil {
		return err
	}
	return a.bindBody(w, r, &p.newGroup)
}

// createConversation creates a group owned by the caller: 201, or 200
// with the group a create with the same key made before (a retry whose
// answer was lost). Only groups are created here: a DIRECT conversation is
// unique per pair, which only direct.open can guarantee.
func createConversation(a *API, ctx context.Context, user int64, p createParams) (int, any, error) {
	switch strings.ToUpper(p.Type) {
	case string(chat.Group):
	case string(chat.Direct):
		return 0, nil, chat.Errorf(chat.CodeInvalid, `direct conversations are opened with POST /v1/direct/{peerId} (RPC direct.open)`)
	default:
		return 0, nil, chat.Errorf(chat.CodeInvalid, `type must be "group"`)
	}
	return createdReply(a.svc.CreateGroupWith(ctx, chat.GroupRequest{CreatorID: user, Title: p.Title, Members: p.Members,
		Key: p.ClientMsgID}))
}

// directParams: POST /v1/direct/{peerId} and RPC direct.open.
type directParams struct {
	PeerID int64 `json:"peerId"`
}

func bindOpenDirect(a *API, w http.ResponseWriter, r *http.Request, p *directParams) error {
	var err error
	if p.PeerID, err = pathID(r, "peerId", "peerId"); err != nil {
		return err
	}
	// No body is needed; an empty one or {} is accepted because many
	// clients always send one with POST.
	return a.bindNoBody(w, r)
}

// openDirect returns the pair's one DIRECT conversation: 201 when this call
// created it, 200 when it existed, so clients can tell without a GET.
func openDirect(a *API, ctx context.Context, user int64, p directParams) (int, any, error) {
	return createdReply(a.svc.OpenDirect(ctx, user, p.PeerID))
}

// conversationParams: GET /v1/conversations/{id} and RPC conversation.get.
type conversationParams struct {
	ConversationID int64 `json:"conversationId"`
}

func bindGetConversation(_ *API, _ http.ResponseWriter, r *http.Request, p *conversationParams) error {
	return pathConversation(r, &p.ConversationID)
}

func getConversation(a *API, ctx context.Context, user int64, p conversationParams) (int, any, error) {
	return okReply(a.svc.GetConversation(ctx, p.ConversationID, user))
}

// memberParams: the members routes and RPC members.add / members.remove.
type memberParams struct {
	ConversationID int64 `json:"conversationId"`
	userBody
}

// userBody names a user in a request body.
type userBody struct {
	UserID int64 `json:"userId"`
}

// addParams: POST /v1/conversations/{id}/members and RPC members.add; role
// is "member" (the default) or "admin" (the owner only).
type addParams struct {
	ConversationID int64 `json:"conversationId"`
	newMember
}

// newMember is members.add's request body: who joins, with which role.
type newMember struct {
	UserID int64     `json:"userId"`
	Role   chat.Role `json:"role"`
}

func bindAddMember(a *API, w http.ResponseWriter, r *http.Request, p *addParams) error {
	return a.bindConversationBody(w, r, &p.ConversationID, &p.newMember)
}

// addMember adds a member (owner/admin only; an admin, the owner only):
// 201 with the member, or 200 when they already were one, so a retried add
// is harmless.
func addMember(a *API, ctx context.Context, user int64, p addParams) (int, any, error) {
	return createdReply(a.svc.AddMemberAs(ctx, p.ConversationID, user, p.UserID, p.Role))
}

func bindRemoveMember(a *API, w http.ResponseWriter, r *http.Request, p *memberParams) error {
	if err := pathConversationAnd(r, &p.ConversationID, "userId", &p.UserID); err != nil {
		return err
	}
	return a.bindNoBody(w, r)
}

// removeMember removes a member (owner/admin) or lets the caller leave.
func removeMember(a *API, ctx context.Context, user int64, p memberParams) (int, any, error) {
	if err := a.svc.RemoveMember(ctx, p.ConversationID, user, p.UserID); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}
