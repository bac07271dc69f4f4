package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	chat "github.com/chatd/chatd"
)

// Transport-level error codes. They complement chat.Code for failures that
// happen before a request reaches the domain; like chat.Code they are part of
// the public API.
const (
	CodeUnauthorized         = "unauthorized"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodePreconditionFailed   = "precondition_failed"
	CodeRangeNotSatisfiable  = "range_not_satisfiable"
)

// retryAfterSeconds is what 503 answers (and a 429 without a bucket of
// its own) suggest: they carry no delay of their own, and a second is long
// enough for a client not to hammer and short enough not to stall a chat
// UI.
const retryAfterSeconds = 1

// ErrorBody is the JSON of every failure, over HTTP and RPC alike.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the machine-readable code and a client-safe message.
// RetryAfter (seconds) is set on every 429 and 503 (rate_limited,
// unavailable), as Retry-After is: RPC replies have no headers to carry
// it.
type ErrorDetail struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retryAfter,omitempty"`
}

// apiError is a failure of the transport itself (bad token, bad media type)
// whose status and code chat.Code does not cover.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errUnauthorized(msg string) error {
	return &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, message: msg}
}

func errMediaType(msg string) error {
	return &apiError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType, message: msg}
}

// ErrorStatus maps a domain error code to its HTTP status (the table in
// chat/errors.go). Unknown codes are 500 so a new code cannot pass as success.
func ErrorStatus(code chat.Code) int {
	switch code {
	case chat.CodeInvalid:
		return http.StatusBadRequest
	case chat.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case chat.CodeUnsupported:
		return http.StatusUnsupportedMediaType
	case chat.CodeGone:
		return http.StatusGone
	case chat.CodeNotMember, chat.CodeForbidden, chat.CodeBlocked:
		return http.StatusForbidden
	case chat.CodeNotFound:
		return http.StatusNotFound
	case chat.CodeConflict, chat.CodeMemberCap, chat.CodeTooManyReactions:
		return http.StatusConflict
	case chat.CodeRateLimited:
		return http.StatusTooManyRequests
	case chat.CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// describe turns any error into its status and client-safe body, logging the
// ones the client cannot be blamed for. op names the operation in the log.
func (a *API) describe(ctx context.Context, op string, userID int64, err error) (int, ErrorBody) {
	if errors.Is(err, chat.ErrTokenRevoked) {
		// Found when the call starts, or by a write that checks the token
		// again (a device registration racing a revocation).
		err = errUnauthorized(err.Error())
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ErrorBody{withRetryAfter(ErrorDetail{Code: ae.code, Message: ae.message}, ae.status, nil)}
	}
	code := chat.ErrorCode(err)
	status := ErrorStatus(code)
	msg := chat.ErrorMessage(err)
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The client went away; nobody reads the answer and it is no fault
		// of the server, so no error log.
		a.log.DebugContext(ctx, "request canceled", "op", op, "user", userID)
	case status == http.StatusInternalServerError:
		// Never show an untyped error: it may hold SQL, hosts or ids.
		code, msg = chat.CodeInternal, "internal error"
		a.log.ErrorContext(ctx, "internal error", "op", op, "user", userID, "err", err)
	case status >= 500:
		a.log.WarnContext(ctx, "operation unavailable", "op", op, "user", userID, "err", err)
	}
	var rl *chat.RateLimitInfo
	if code == chat.CodeRateLimited || code == chat.CodeUnavailable {
		// An unavailable answer may say when it can change (an identity
		// provider's key set that may not be fetched again before then).
		rl = chat.RateLimitOf(err)
	}
	return status, ErrorBody{withRetryAfter(ErrorDetail{Code: string(code), Message: msg}, status, rl)}
}

// withRetryAfter sets d's RetryAfter for a 429 or 503 answer: when the
// bucket rl that refused has a token again, else retryAfterSeconds.
func withRetryAfter(d ErrorDetail, status int, rl *chat.RateLimitInfo) ErrorDetail {
	switch {
	case rl != nil:
		d.RetryAfter = rl.RetryAfterSeconds()
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		d.RetryAfter = retryAfterSeconds
	}
	return d
}

// writeError answers an HTTP request with err.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, op string, userID int64, err error) {
	status, body := a.describe(r.Context(), op, userID, err)
	switch status {
	case http.StatusUnauthorized:
		// RFC 6750: say which scheme, and that the token was the problem
		// when there was one.
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chatd"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chatd", error="invalid_token"`)
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.FormatInt(body.Error.RetryAfter, 10))
		if rl := chat.RateLimitOf(err); rl != nil && status == http.StatusTooManyRequests {
			setRateLimitHeaders(w.Header(), rl)
		}
	}
	writeJSON(w, status, body)
}

// setRateLimitHeaders describes the bucket that refused the request:
// Retry-After (whole seconds until a token is back, at least 1),
// X-RateLimit-Limit (the bucket size), X-RateLimit-Remaining (tokens left)
// and X-RateLimit-Reset (whole seconds until the bucket is full again).
func setRateLimitHeaders(h http.Header, rl *chat.RateLimitInfo) {
	h.Set("Retry-After", strconv.FormatInt(rl.RetryAfterSeconds(), 10))
	h.Set("X-RateLimit-Limit", strconv.Itoa(rl.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(rl.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(rl.Reset, 0), 10))
}

func ceilSeconds(d time.Duration, least int64) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, least)
}

// logger returns l, or a logger that drops everything when l is nil, so the
// API never has to check.
func logger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
