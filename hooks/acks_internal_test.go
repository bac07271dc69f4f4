package hooks

import (
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/testkit"
)

// The answers an ackQueue hands to the session count until the session
// reports them written (or never to be): with max of them waiting, the
// next publish is not taken, whatever the version, until one is.
func TestAnAckQueueTakesNoPublishWhileItsMaxOfAnswersWaitToBeWritten(t *testing.T) {
	const max = 4
	q := newAckQueue(max)
	var handed []chat.Ack
	for i := range max {
		s, ok := q.reserve(uint16(i+1), false, false)
		if !ok || s == nil {
			t.Fatalf("reserve %d refused", i+1)
		}
		q.complete(s, chat.Ack{}, func(acks []chat.Ack) { handed = append(handed, acks...) })
	}
	reserved := make(chan struct{})
	go func() {
		if s, ok := q.reserve(max+1, false, false); ok && s != nil {
			close(reserved)
		}
	}()
	select {
	case <-reserved:
		t.Fatalf("a publish was taken with %d answers unwritten", max)
	case <-time.After(100 * time.Millisecond):
	}
	handed[0].Sent(nil) // written
	testkit.Receive(t, reserved, 10*time.Second, "a publish was not taken once an answer was written")
}

// A retransmission of a publish still in line takes no place: the first
// one's answer is its answer.
func TestAnAckQueueGivesARetransmissionOfAPublishInLineNoPlace(t *testing.T) {
	q := newAckQueue(4)
	first, _ := q.reserve(7, false, false)
	if s, ok := q.reserve(7, false, true); !ok || s != nil {
		t.Fatalf("retransmission: slot %v ok %v, want none and ok", s, ok)
	}
	var handed []chat.Ack
	q.complete(first, chat.Ack{}, func(acks []chat.Ack) { handed = append(handed, acks...) })
	if len(handed) != 1 || handed[0].PacketID != 7 {
		t.Fatalf("answers %v, want [7]", handed)
	}
	handed[0].Sent(nil) // written
	if s, ok := q.reserve(7, false, true); !ok || s == nil {
		t.Fatal("a DUP of a publish no longer in line must take a place")
	}
}

// Nor does a retransmission of a publish whose answer was handed to the
// session and is not written yet: it took a place of its own and got a
// second PUBACK of the packet id, which a client that freed the id at the
// first takes for the answer to its next publish with it. Once the answer
// is written, a DUP is a publish of its own (MQTT 3.1.1 §4.3.2).
func TestAnAckQueueGivesARetransmissionOfAPublishWhoseAnswerIsUnwrittenNoPlace(t *testing.T) {
	q := newAckQueue(4)
	first, _ := q.reserve(7, false, false)
	other, _ := q.reserve(8, false, false)
	var handed []chat.Ack
	q.complete(first, chat.Ack{}, func(acks []chat.Ack) { handed = append(handed, acks...) })
	q.complete(other, chat.Ack{}, func(acks []chat.Ack) { handed = append(handed, acks...) })
	if s, ok := q.reserve(7, false, true); !ok || s != nil {
		t.Fatalf("retransmission of 7, its answer unwritten: slot %v ok %v, want none and ok", s, ok)
	}
	handed[0].Sent(nil) // 7 written, 8 not
	if s, ok := q.reserve(8, false, true); !ok || s != nil {
		t.Fatalf("retransmission of 8, its answer unwritten: slot %v ok %v, want none and ok", s, ok)
	}
	if s, ok := q.reserve(7, false, true); !ok || s == nil {
		t.Fatal("a DUP of a publish whose answer was written must take a place")
	}
}
