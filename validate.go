package chat

import (
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// DefaultMaxBodyBytes is the default message body limit (16 KiB).
const DefaultMaxBodyBytes = 16 * 1024

// MaxBodyBytesCeiling is the largest body limit a server may be
// configured with (32 MiB): requests it admits (MaxRequestBytes) must
// still fit an MQTT packet, which cannot exceed 256 MiB.
const MaxBodyBytesCeiling = 32 << 20

// RequestOverhead is what a request may hold besides its message body:
// field names, ids, a clientMsgId, a title or a member list, and a
// message's attachments with their captions, escaped.
const RequestOverhead = 64 << 10

// DefaultMaxMembers is the default group member cap.
const DefaultMaxMembers = 1000

// Default edit and recall windows: how long after a message's createdAt
// its sender may still edit or recall it.
const (
	DefaultEditWindow   = 48 * time.Hour
	DefaultRecallWindow = 24 * time.Hour
)

// NoLimit, as an EditWindow or RecallWindow, lets senders edit or recall
// their messages at any time.
const NoLimit time.Duration = -1

// Limits are the configurable validation limits.
type Limits struct {
	MaxBodyBytes int // message body, bytes of UTF-8
	MaxMembers   int // members per group
	// EditWindow and RecallWindow: 0 takes the default, NoLimit none.
	EditWindow, RecallWindow time.Duration
}

// DefaultLimits returns the documented defaults.
func DefaultLimits() Limits {
	return Limits{MaxBodyBytes: DefaultMaxBodyBytes, MaxMembers: DefaultMaxMembers,
		EditWindow: DefaultEditWindow, RecallWindow: DefaultRecallWindow}
}

// WithDefaults fills the zero fields with the defaults.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultMaxMembers
	}
	if l.EditWindow == 0 {
		l.EditWindow = DefaultEditWindow
	}
	if l.RecallWindow == 0 {
		l.RecallWindow = DefaultRecallWindow
	}
	return l
}

// MaxRequestBytes bounds the JSON of one request (an HTTP body, an RPC
// payload, the payload of an MQTT send). JSON may escape one byte of
// body as six (a control character as \u0001; an encoder may write '<'
// or any non-ASCII character as \u escapes too), so a body within the
// limit never meets a transport limit first: the body's own check then
// answers with a precise too_large.
func (l Limits) MaxRequestBytes() int64 {
	return RequestOverhead + 6*int64(l.withDefaults().MaxBodyBytes)
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
func ValidateClientMsgID(id string) (string, error) { return ValidateUUID("clientMsgId", id) }

// ValidateUUID requires the value of field (named as the caller sent it:
// clientMsgId, or HTTP's Idempotency-Key header) to be a UUID and returns
// it in canonical form.
func ValidateUUID(field, id string) (string, error) {
	if id == "" {
		return "", Errorf(CodeInvalid, "%s is missing", field)
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", Errorf(CodeInvalid, "%s must be a UUID like 123e4567-e89b-12d3-a456-426614174000", field)
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

// EditBody is an edit's body as a transport decoded it, nil when the
// field was left out. It is required: "" clears the text of a message with
// attachments, which an edit that left its body out must not do by
// accident.
func EditBody(body *string) (string, error) {
	if body == nil {
		return "", Errorf(CodeInvalid, `body is missing: give the new text ("" clears the text of a message with attachments)`)
	}
	return *body, nil
}

// ValidateSend checks a SendRequest and canonicalises its ClientMsgID.
func (l Limits) ValidateSend(r *SendRequest) error {
	c := r.Change()
	if err := l.ValidateChange(&c); err != nil {
		return err
	}
	r.ClientMsgID = c.ClientMsgID
	return nil
}

// ValidateChange checks what can be checked of a change without the
// store (the rest depends on the conversation's state) and canonicalises
// its ClientMsgID.
func (l Limits) ValidateChange(c *Change) error {
	if err := ValidateID("conversationId", c.ConversationID); err != nil {
		return err
	}
	if err := ValidateID("senderId", c.UserID); err != nil {
		return err
	}
	id, err := ValidateClientMsgID(c.ClientMsgID)
	if err != nil {
		return err
	}
	c.ClientMsgID = id
	if len(c.Attachments) > 0 && c.Kind != KindMessage && c.Kind != "" {
		return Errorf(CodeInvalid, "only a message carries attachments")
	}
	switch c.Kind {
	case KindMessage, "":
		c.Kind = KindMessage
		if c.ReplyTo < 0 {
			return Errorf(CodeInvalid, "replyTo must be a positive seq")
		}
		if c.ReplyTo > 0 && c.Forward != nil {
			// Its answer, events and clients show one reference: a
			// forward's source, or the message a reply quotes.
			return Errorf(CodeInvalid, "a forward cannot also reply to a message: forward it, then reply to the forward")
		}
		if len(c.Attachments) > 0 {
			if c.Forward != nil {
				return Errorf(CodeInvalid, "a forward copies the message: it takes no attachments of its own")
			}
			if err := ValidateAttachments(c.Attachments); err != nil {
				return err
			}
			if c.Body == "" {
				return nil // the attachments are the message
			}
			return l.ValidateBody(c.Body)
		}
		if c.Forward != nil {
			if err := ValidateID("forward.conversationId", c.Forward.ConversationID); err != nil {
				return err
			}
			if err := ValidateID("forward.seq", c.Forward.Seq); err != nil {
				return err
			}
			if c.Body != "" {
				return Errorf(CodeInvalid, "a forward copies the message's body: leave body empty")
			}
			return nil
		}
		return l.ValidateBody(c.Body)
	case KindEdit:
		if err := ValidateID("seq", c.TargetSeq); err != nil {
			return err
		}
		if c.Body == "" {
			// The new body obeys the send rules: a message with
			// attachments may have none. Whether this one has any is the
			// store's to say (chat_send_batch refuses an empty body for a
			// message without them).
			return nil
		}
		return l.ValidateBody(c.Body)
	case KindRecall:
		return ValidateID("seq", c.TargetSeq)
	case KindReaction:
		if err := ValidateID("seq", c.TargetSeq); err != nil {
			return err
		}
		return ValidateEmoji(c.Emoji, c.On)
	}
	return Errorf(CodeInvalid, "unknown change %q", c.Kind)
}
