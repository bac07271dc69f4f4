package chat

import (
	"unicode/utf8"

	"github.com/google/uuid"
)

// DefaultMaxBodyBytes is the default message body limit (16 KiB).
const DefaultMaxBodyBytes = 16 * 1024

// DefaultMaxMembers is the default group member cap.
const DefaultMaxMembers = 1000

// Limits are the configurable validation limits.
type Limits struct {
	MaxBodyBytes int // message body, bytes of UTF-8
	MaxMembers   int // members per group
}

// DefaultLimits returns the documented defaults.
func DefaultLimits() Limits {
	return Limits{MaxBodyBytes: DefaultMaxBodyBytes, MaxMembers: DefaultMaxMembers}
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultMaxMembers
	}
	return l
}

// ValidateBody rejects empty, oversize and non-UTF-8 bodies. PostgreSQL text
// cannot hold NUL, so NUL is rejected too.
func (l Limits) ValidateBody(body string) error {
	l = l.withDefaults()
	if body == "" {
		return Errorf(CodeInvalid, "body is empty")
	}
	if len(body) > l.MaxBodyBytes {
		return Errorf(CodeTooLarge, "body is %d bytes, the limit is %d", len(body), l.MaxBodyBytes)
	}
	if !utf8.ValidString(body) {
		return Errorf(CodeInvalid, "body is not valid UTF-8")
	}
	for i := 0; i < len(body); i++ {
		if body[i] == 0 {
			return Errorf(CodeInvalid, "body contains a NUL character")
		}
	}
	return nil
}

// ValidateClientMsgID requires a UUID and returns it in canonical form.
func ValidateClientMsgID(id string) (string, error) {
	if id == "" {
		return "", Errorf(CodeInvalid, "clientMsgId is missing")
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", Errorf(CodeInvalid, "clientMsgId must be a UUID like 123e4567-e89b-12d3-a456-426614174000")
	}
	return u.String(), nil
}

// ValidateID requires a positive id.
func ValidateID(what string, id int64) error {
	if id <= 0 {
		return Errorf(CodeInvalid, "%s must be a positive integer", what)
	}
	return nil
}

// ValidateSend checks a SendRequest and canonicalises its ClientMsgID.
func (l Limits) ValidateSend(r *SendRequest) error {
	if err := ValidateID("conversationId", r.ConversationID); err != nil {
		return err
	}
	if err := ValidateID("senderId", r.SenderID); err != nil {
		return err
	}
	id, err := ValidateClientMsgID(r.ClientMsgID)
	if err != nil {
		return err
	}
	r.ClientMsgID = id
	return l.ValidateBody(r.Body)
}
