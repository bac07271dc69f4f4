package chat

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. It is part of the public
// API: HTTP error bodies, RPC replies and MQTT error events carry it.
type Code string

const (
	CodeInvalid          Code = "invalid"            // malformed input: 400 / MQTT 0x99
	CodeTooLarge         Code = "too_large"          // body or file over the limit: 413 / MQTT 0x99
	CodeUnsupported      Code = "unsupported"        // a file type that is not allowed: 415 / MQTT 0x99
	CodeNotMember        Code = "not_member"         // caller is not a member: 403 / MQTT 0x87
	CodeForbidden        Code = "forbidden"          // member, but role does not allow it: 403 / MQTT 0x87
	CodeBlocked          Code = "blocked"            // the other member of a direct conversation, or a user being added to a group, blocked the caller: 403 / MQTT 0x87
	CodeNotFound         Code = "not_found"          // unknown conversation or message: 404 / MQTT 0x87
	CodeGone             Code = "gone"               // the message was recalled: 410 / MQTT 0x87
	CodeConflict         Code = "conflict"           // clientMsgId used by another sender: 409 / MQTT 0x99
	CodeMemberCap        Code = "member_cap"         // group is full: 409 / MQTT 0x97
	CodeTooManyReactions Code = "too_many_reactions" // a new emoji on a message with MaxReactionKinds already: 409 / MQTT 0x99 (final: waiting does not lift it)
	CodeRateLimited      Code = "rate_limited"       // over a rate limit: 429 / MQTT 0x97
	CodeUnavailable      Code = "unavailable"        // database down or timing out: 503 / MQTT 0x80
	CodeInternal         Code = "internal"           // a bug: 500 / MQTT 0x83
)

// Error is the typed error of the domain. Compare with errors.Is against the
// sentinels below (matching is by Code) or read the Code with ErrorCode.
type Error struct {
	Code    Code
	Message string
	Err     error // cause, never shown to clients
	// RateLimit describes the limit that refused the request; set on
	// rate_limited errors so transports can say when to retry (HTTP
	// Retry-After and X-RateLimit-*).
	RateLimit *RateLimitInfo
}

// RateLimitInfo is the state of the token bucket that refused a request.
type RateLimitInfo struct {
	Kind       RateKind      // which limit: send, conv, read, typing, api, connect
	Limit      int           // the bucket size (burst)
	Remaining  int           // whole tokens left in the bucket
	RetryAfter time.Duration // until one token is available again
	Reset      time.Duration // until the bucket is full again
}

// RetryAfterSeconds is when to retry, as every transport says it: whole
// seconds until a token is back, at least 1 (HTTP Retry-After, the
// retryAfter of HTTP and RPC error bodies, MQTT user properties and error
// events). A client that waits so long finds the token there.
func (r *RateLimitInfo) RetryAfterSeconds() int64 {
	return max(int64((r.RetryAfter+time.Second-1)/time.Second), 1)
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error with the same Code, so errors.Is(err, ErrNotMember)
// holds for every not-member error whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInvalid     = &Error{Code: CodeInvalid, Message: "invalid request"}
	ErrTooLarge    = &Error{Code: CodeTooLarge, Message: "too large"}
	ErrUnsupported = &Error{Code: CodeUnsupported, Message: "unsupported file type"}
	ErrNotMember   = &Error{Code: CodeNotMember, Message: "not a member of this conversation"}
	ErrForbidden   = &Error{Code: CodeForbidden, Message: "not allowed"}
	ErrBlocked     = &Error{Code: CodeBlocked, Message: "blocked by this user"}
	ErrNotFound    = &Error{Code: CodeNotFound, Message: "not found"}
	ErrGone        = &Error{Code: CodeGone, Message: "recalled"}
	ErrConflict    = &Error{Code: CodeConflict, Message: "conflict"}
	ErrMemberCap   = &Error{Code: CodeMemberCap, Message: "member limit reached"}
	ErrRateLimited = &Error{Code: CodeRateLimited, Message: "rate limited"}
	ErrUnavailable = &Error{Code: CodeUnavailable, Message: "service unavailable"}
)

// Errorf builds a typed error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NoConversation is the refusal of a conversation id that names none, and
// NotMemberOf of one the caller is not in: every store answers a
// members-only operation with these words, so that every route and RPC
// method tells the two apart alike.
func NoConversation(id int64) *Error {
	return Errorf(CodeNotFound, "conversation %d does not exist", id)
}

// NotMemberOf: see NoConversation.
func NotMemberOf(id int64) *Error {
	return Errorf(CodeNotMember, "not a member of conversation %d", id)
}

// Unavailable wraps an infrastructure failure (database down, timeout) so
// transports answer "try again" instead of "invalid".
func Unavailable(op string, err error) *Error {
	return &Error{Code: CodeUnavailable, Message: op + " failed, retry later", Err: err}
}

// RateLimitOf returns the rate limit that refused err, nil for other errors.
func RateLimitOf(err error) *RateLimitInfo {
	var e *Error
	if errors.As(err, &e) {
		return e.RateLimit
	}
	return nil
}

// ErrorCode returns the Code of err, CodeInternal for untyped errors.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the client-safe message of err.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
