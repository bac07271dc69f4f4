package httpapi

import (
	"context"
	"net/http"

	chat "github.com/chatd/chatd"
)

// deviceParams: POST /v1/devices body and RPC device.register.
type deviceParams = chat.DeviceRequest

func bindRegisterDevice(a *API, w http.ResponseWriter, r *http.Request, p *deviceParams) error {
	return a.bindBody(w, r, p)
}

// DeviceID answers device.register.
type DeviceID struct {
	ID int64 `json:"id"`
}

// registerDevice is 201 for a new device and 200 when the token or
// endpoint was registered already (it is updated, and now the caller's).
func registerDevice(a *API, ctx context.Context, user int64, p deviceParams) (int, any, error) {
	id, created, err := a.svc.RegisterDevice(ctx, user, p)
	if err != nil {
		return 0, nil, err
	}
	if created {
		return http.StatusCreated, DeviceID{ID: id}, nil
	}
	return http.StatusOK, DeviceID{ID: id}, nil
}

// noParams: operations without parameters.
type noParams struct{}

// bindNone binds an operation without parameters. A POST of one (tokens
// revoke) refuses a body as every route taking none does: ignoring it
// would sign the user out on a request that meant something else.
func bindNone(a *API, w http.ResponseWriter, r *http.Request, _ *noParams) error {
	return a.bindNoBody(w, r)
}

// DeviceList answers device.list.
type DeviceList struct {
	Devices []chat.Device `json:"devices"`
}

func listDevices(a *API, ctx context.Context, user int64, _ noParams) (int, any, error) {
	ds, err := a.svc.Devices(ctx, user)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, DeviceList{Devices: ds}, nil
}

// deviceIDParams: DELETE /v1/devices/{id} and RPC device.delete.
type deviceIDParams struct {
	ID int64 `json:"id"`
}

func bindDeviceID(a *API, w http.ResponseWriter, r *http.Request, p *deviceIDParams) error {
	var err error
	if p.ID, err = pathID(r, "id", "id"); err != nil {
		return err
	}
	return a.bindNoBody(w, r)
}

func deleteDevice(a *API, ctx context.Context, user int64, p deviceIDParams) (int, any, error) {
	if err := a.svc.DeleteDevice(ctx, user, p.ID); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func vapidKey(a *API, _ context.Context, _ int64, _ noParams) (int, any, error) {
	return okReply(a.svc.VAPIDPublicKey())
}

// settingsParams: PUT /v1/conversations/{id}/settings and RPC
// conversation.settings.
type settingsParams struct {
	ConversationID int64 `json:"conversationId"`
	chat.SettingsRequest
}

func bindSettings(a *API, w http.ResponseWriter, r *http.Request, p *settingsParams) error {
	return a.bindConversationBody(w, r, &p.ConversationID, &p.SettingsRequest)
}

func setSettings(a *API, ctx context.Context, user int64, p settingsParams) (int, any, error) {
	return okReply(a.svc.SetConversationSettings(ctx, p.ConversationID, user, p.SettingsRequest))
}
