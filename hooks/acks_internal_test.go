package hooks

import (
	"testing"
	"time"

	chat "github.com/chatd/chatd"
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
	select {
	case <-reserved:
	case <-time.After(10 * time.Second):
		t.Fatal("a publish was not taken once an answer was written")
	}
}

// A retransmission of a publish still in line takes no place: the first
// one's answer is its answer.
func TestAnAckQueueGivesARetransmissionOfAPublishInLineNoPlace(t *testing.T) {
	q := newAckQueue(4)
	first, _ := q.reserve(7, false, false)
	if s, ok := q.reserve(7, false, true); !ok || s != nil {
		t.Fatalf("retransmission: slot %v ok %v, want none and ok", s, ok)
	}
	var ids []uint16
	q.complete(first, chat.Ack{}, func(acks []chat.Ack) {
		for _, a := range acks {
			ids = append(ids, a.PacketID)
		}
	})
	if len(ids) != 1 || ids[0] != 7 {
		t.Fatalf("answers %v, want [7]", ids)
	}
	if s, ok := q.reserve(7, false, true); !ok || s == nil {
		t.Fatal("a DUP of a publish no longer in line must take a place")
	}
}
