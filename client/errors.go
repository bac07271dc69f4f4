package client

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// Sentinel errors. Every error the client returns for a refusal by the
// server is an *Error; compare it with errors.Is against these (matching is
// by class, see Error.Is), or read its Code.
var (
	// ErrNotMember: the user is not a member of the conversation (RPC code
	// not_member; for a publish, PUBACK 0x87, which also covers an unknown
	// conversation).
	ErrNotMember = errors.New("not a member of the conversation")
	// ErrForbidden: a member whose role does not allow the operation.
	ErrForbidden = errors.New("not allowed")
	// ErrNotFound: unknown conversation, message, member or RPC method.
	ErrNotFound = errors.New("not found")
	// ErrGone: the message (or an attachment with it) was recalled, or an
	// avatar chatd kept was released, replaced or removed by its owner
	// (code gone; the profile or conversation read before is stale).
	ErrGone = errors.New("message recalled")
	// ErrBlocked: the other member of a direct conversation blocked the
	// user (code blocked; PUBACK 0x87 with the code property).
	ErrBlocked = errors.New("blocked by the other member")
	// ErrInvalid: the request is malformed or refused for good (PUBACK
	// 0x99; codes invalid, too_large, unsupported, conflict,
	// too_many_reactions). Resending it unchanged fails again.
	ErrInvalid = errors.New("invalid request")
	// ErrRateLimited: over a rate limit (PUBACK 0x97, code rate_limited);
	// a refused request's Error.RetryAfter says when to try again.
	ErrRateLimited = errors.New("rate limited")
	// ErrMemberCap: the group is full.
	ErrMemberCap = errors.New("group is full")
	// ErrUnavailable: the server could not do it now (PUBACK 0x80/0x83,
	// codes unavailable and internal) or could not be reached. Send retries
	// these by itself until its context ends.
	ErrUnavailable = errors.New("chatd unavailable")
	// ErrUnauthorized: the token was refused (CONNACK 0x86/0x87, 401).
	ErrUnauthorized = errors.New("token refused")
	// ErrClientIDRejected: chatd refused the client id (CONNACK 0x85:
	// another user's, or longer than 256 bytes); the client stopped
	// reconnecting (Client.Err). The token was good.
	ErrClientIDRejected = errors.New("client id refused")
	// ErrTakenOver: other clients connecting with the same ClientID took
	// the session over again and again (DISCONNECT 0x8E, code
	// taken_over); the client stopped reconnecting (Client.Err).
	ErrTakenOver = errors.New("client id in use by another client")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
	// ErrQueued: Send's context ended before the server acknowledged the
	// message. It stays queued in the session and is sent in the background
	// (also after a restart with the same SessionDir); the error also wraps
	// the context's error.
	ErrQueued = errors.New("message queued, not yet acknowledged")
)

// Error is a refusal by chatd.
type Error struct {
	// Code is the stable machine-readable code of the HTTP API and RPC
	// ("not_member", "invalid", ...). For a refused publish it is derived
	// from the PUBACK reason code.
	Code string
	// Message is the server's explanation, for people.
	Message string
	// Status is the HTTP status of an RPC reply; 0 for publishes.
	Status int
	// Reason is the MQTT v5 reason code of a refused publish; 0 for RPC.
	Reason byte
	// Op names what failed, e.g. "send" or "rpc history".
	Op string
	// RetryAfter is how long to wait before retrying a request refused as
	// rate_limited or unavailable (busy request workers, a database
	// outage), as chatd's answer says (an RPC reply's or HTTP answer's
	// error.retryAfter, a PUBACK's retryAfter user property: whole
	// seconds, at least 1; else an HTTP 429's or 503's Retry-After
	// header); 0 when it does not say.
	RetryAfter time.Duration
}

// errorDetail is chatd's JSON error object, in RPC replies and HTTP
// answers alike.
type errorDetail struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retryAfter"`
}

// fill sets e's code, message and retry delay from d.
func (e *Error) fill(d errorDetail) {
	e.Code, e.Message = d.Code, d.Message
	e.RetryAfter = time.Duration(d.RetryAfter) * time.Second
}

func (e *Error) Error() string {
	var where string
	if e.Reason != 0 {
		where = fmt.Sprintf(" (reason 0x%02x)", e.Reason)
	} else if e.Status != 0 {
		where = fmt.Sprintf(" (status %d)", e.Status)
	}
	msg := e.Message
	if msg == "" {
		msg = e.Code
	}
	return fmt.Sprintf("%s: %s: %s%s", e.Op, e.Code, msg, where)
}

// codeClass maps codes to the sentinel they match.
var codeClass = map[string]error{
	"not_member":         ErrNotMember,
	"forbidden":          ErrForbidden,
	"not_found":          ErrNotFound,
	"gone":               ErrGone,
	"blocked":            ErrBlocked,
	"invalid":            ErrInvalid,
	"too_large":          ErrInvalid,
	"unsupported":        ErrInvalid,
	"conflict":           ErrInvalid,
	"too_many_reactions": ErrInvalid,
	"rate_limited":       ErrRateLimited,
	"member_cap":         ErrMemberCap,
	"unavailable":        ErrUnavailable,
	"internal":           ErrUnavailable,
	"unauthorized":       ErrUnauthorized,
	"taken_over":         ErrTakenOver,
	"client_id_rejected": ErrClientIDRejected,
}

// Is reports whether target is the sentinel of e's class.
func (e *Error) Is(target error) bool {
	return codeClass[e.Code] == target
}

// reasonCode maps a PUBACK reason code of chatd to an error code, per
// docs/protocol.md "Send outcomes".
func reasonCode(rc byte) string {
	switch rc {
	case 0x87:
		return "not_member"
	case 0x99:
		return "invalid"
	case 0x97:
		return "rate_limited"
	case 0x80:
		return "unavailable"
	case 0x83:
		return "internal"
	case 0x86:
		return "unauthorized"
	default:
		return fmt.Sprintf("reason_0x%02x", rc)
	}
}

// publishError builds the error of a publish refused by its PUBACK: its
// code is the PUBACK's "code" user property when chatd sent one, else
// derived from the reason code; its RetryAfter the "retryAfter" user
// property (whole seconds) of a rate limit's refusal.
func publishError(op string, resp *paho.PublishResponse) *Error {
	e := &Error{Op: op, Code: reasonCode(resp.ReasonCode), Reason: resp.ReasonCode}
	if p := resp.Properties; p != nil {
		e.Message = p.ReasonString
		if c := p.User.Get("code"); c != "" {
			e.Code = c
		}
		if s, err := strconv.ParseInt(p.User.Get("retryAfter"), 10, 64); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	}
	return e
}

// retryable reports whether a refusal is temporary.
func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable)
}
