package client_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
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

// A journal a client wrote before it kept ids lower case holds an
// upper-case clientMsgId as the caller gave it. Sent again after the
// restart, that send was looked up in history by the id as journaled
// when its PUBACKs lacked their seq, never found there (chatd keeps it
// lower case), and stayed pending for ever; and a SendWithID of the
// same id, now kept lower case, was not joined to it. The journal's ids
// are read as chatd keeps them.
func TestASendJournaledWithAnUpperCaseClientMsgIDIsFoundAfterARestart(t *testing.T) {
	t.Parallel()
	srv, _, a, conv := sender(t)
	id := strings.ToUpper(uuid.NewString())
	px := newProxy(t, srv.MQTTAddr())
	cfg := testConfig(t, px.URL(), 1)
	cfg.SessionDir = t.TempDir()
	line, err := json.Marshal(map[string]any{"op": "send", "id": id, "conv": conv, "body": "journaled", "at": time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.SessionDir, "pending.jsonl"), append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	// Offline until its PUBACKs lose their seq.
	px.Cut()
	c, err := client.New(ctxFor(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	c.StripAckSeq(-1)
	px.Resume()
	if p := c.Pending(); len(p) != 1 || p[0].ClientMsgID != strings.ToLower(id) {
		t.Errorf("pending after the restart %+v, want the journaled send under %s", p, strings.ToLower(id))
	}
	seq, err := c.SendWithID(ctxFor(t, 20*time.Second), conv, id, "journaled")
	if err != nil || seq != 1 {
		t.Fatalf("SendWithID of the journaled id: seq %d, %v; want 1", seq, err)
	}
	testkit.WaitFor(t, 20*time.Second, "the journaled send to be resolved", func() bool { return len(c.Pending()) == 0 })
	page, err := a.History(ctxFor(t, 10*time.Second), conv, client.HistoryOptions{Limit: 10})
	if err != nil || len(page) != 1 || page[0].ClientMsgID != strings.ToLower(id) || page[0].Body != "journaled" {
		t.Fatalf("history %+v (%v), want the journaled message once", page, err)
	}
}
