package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	chat "github.com/chatd/chatd"
)

// RPC runs one request of the MQTT v5 request/response path: a client
// published payload (a JSON object, empty meaning {}) to chat/v1/rpc/{method}
// and the broker, having authenticated the connection as userID, wants the
// reply to publish to the client's response topic.
//
// The reply is the JSON body the equivalent HTTP route answers, with a
// "status" field added holding the HTTP status it answers with; failures are
// {"status":n,"error":{"code":...,"message":...}} with the HTTP route's code.
// The reply is always valid JSON: RPC never panics and never returns nil.
func (a *API) RPC(ctx context.Context, userID int64, method string, payload []byte) (reply []byte) {
	start := time.Now()
	status := 0
	logName := method
	defer func() {
		if p := recover(); p != nil {
			a.log.ErrorContext(ctx, "panic serving rpc", "method", logName, "user", userID,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			status = http.StatusInternalServerError
			reply = rpcReply(status, ErrorBody{ErrorDetail{Code: string(chat.CodeInternal), Message: "internal error"}})
		}
		a.log.LogAttrs(ctx, slog.LevelDebug, "rpc request",
			slog.String("method", logName), slog.Int("status", status),
			slog.Duration("duration", time.Since(start)), slog.Int64("user", userID))
	}()

	e := a.rpc[method]
	if e == nil {
		// The method name is client input: log a fixed word, not it.
		logName = "unknown"
	}
	status, v, err := a.dispatch(ctx, e, userID, method, payload)
	if err != nil {
		var body ErrorBody
		status, body = a.describe(ctx, "rpc "+logName, userID, err)
		return rpcReply(status, body)
	}
	return rpcReply(status, v)
}

func (a *API) dispatch(ctx context.Context, e *endpoint, userID int64, method string, payload []byte) (int, any, error) {
	if userID <= 0 {
		// The broker authenticates before it calls; this guards a wiring
		// mistake from acting as "user 0".
		return 0, nil, errUnauthorized("the connection is not authenticated")
	}
	// One budget per user for HTTP requests and RPC calls, unknown
	// methods included: probing costs like calling.
	if err := a.svc.CheckRate(ctx, chat.RateAPI, chat.UserKey(userID)); err != nil {
		return 0, nil, err
	}
	if e == nil {
		if len(method) > 64 {
			method = method[:64] + "..."
		}
		return 0, nil, chat.Errorf(chat.CodeNotFound, "unknown RPC method %q; valid methods: %s",
			method, strings.Join(RPCMethods(), ", "))
	}
	if limit := a.maxRequestBytes(); int64(len(payload)) > limit {
		return 0, nil, chat.Errorf(chat.CodeTooLarge, "payload is larger than %d bytes", limit)
	}
	return e.call(a, ctx, userID, payload)
}

// rpcReply encodes v (a JSON object, or nil for 204) with "status" first.
func rpcReply(status int, v any) []byte {
	head := `{"status":` + strconv.Itoa(status)
	if v == nil {
		return []byte(head + "}")
	}
	b, err := chat.EncodeJSON(v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return []byte(`{"status":500,"error":{"code":"internal","message":"internal error"}}`)
	}
	if string(b) == "{}" {
		return []byte(head + "}")
	}
	return append([]byte(head+","), b[1:]...)
}
