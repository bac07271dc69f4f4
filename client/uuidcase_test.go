package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// chatd takes a clientMsgId in either letter case and keeps it lower case
// (docs/protocol.md): the history a client reads carries it so. A send
// whose PUBACKs lack their seq is looked up in history by its clientMsgId;
// one the caller gave in upper case was never found there, and its Send
// waited for ever on a message that had committed. The client keeps the
// id as chatd does, so it is found, and the error events and message
// events that name it name it alike.
func TestASendWithAnUpperCaseClientMsgIDIsFoundByIt(t *testing.T) {
	t.Parallel()
	_, _, a, conv := sender(t)
	a.StripAckSeq(-1)
	id := strings.ToUpper(uuid.NewString())
	seq, err := a.SendWithID(ctxFor(t, 15*time.Second), conv, id, "upper")
	if err != nil || seq != 1 {
		t.Fatalf("SendWithID with an upper-case id whose PUBACKs carry no seq: seq %d, %v; want 1", seq, err)
	}
	a.StripAckSeq(0)
	// A resend in the other letter case is the same message.
	if again, err := a.SendWithID(ctxFor(t, 10*time.Second), conv, strings.ToLower(id), "upper"); err != nil || again != seq {
		t.Fatalf("the resend in lower case: seq %d, %v; want %d", again, err, seq)
	}
	// Only chatd's own form of a UUID is one: the others are refused at
	// once, as chatd would refuse them.
	for _, bad := range []string{"{" + strings.ToLower(id) + "}", "urn:uuid:" + strings.ToLower(id), strings.ReplaceAll(id, "-", "")} {
		if _, err := a.SendWithID(ctxFor(t, 10*time.Second), conv, bad, "x"); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("SendWithID with clientMsgId %q: %v, want ErrInvalid", bad, err)
		}
	}
}
