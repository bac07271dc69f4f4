package main

import (
	"fmt"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// TestTheChecksCatchALostADuplicateAndAnOutOfOrderDelivery feeds a client
// deliveries as the MQTT reader would and checks that each fault is
// counted: the index of records, the order check and the losses.
func TestTheChecksCatchALostADuplicateAndAnOutOfOrderDelivery(t *testing.T) {
	tr := newTracker()
	b := &bench{o: &options{mode: modeSteady}, t: tr}
	newClient := func(idx int32) *benchClient {
		return &benchClient{b: b, idx: idx, user: int64(100 + idx), samples: newSamples(), last: map[int64]int64{},
			types: map[string]int64{}, newest: map[int64]int64{}, own: map[int64]int64{}, react: map[int64]reactState{}}
	}
	sender, receiver := newClient(0), newClient(1)
	deliver := func(c *benchClient, id string, seq int64) {
		conv := 7
		if id == "id-9" {
			conv = 8
		}
		payload := fmt.Sprintf(`{"type":"message.new","conversationId":%d,"seq":%d,"senderId":100,"clientMsgId":%q,"body":"x"}`, conv, seq, id)
		c.onPublish(packets.Packet{Payload: []byte(payload)})
	}
	// Three messages in conversation 7, seqs 1-3, each owed to both members.
	for seq := int64(1); seq <= 3; seq++ {
		r := &msgRec{conv: 7, sender: 0, expected: 2}
		id := fmt.Sprintf("id-%d", seq)
		tr.published(id, r)
		tr.ackedMsg(r, seq, sender.samples)
		deliver(sender, id, seq)
	}
	deliver(receiver, "id-1", 1)
	deliver(receiver, "id-1", 1) // a duplicate
	deliver(receiver, "id-3", 3) // seq 2 skipped: out of order, and lost
	deliver(receiver, "id-9", 1) // nobody published it (in conversation 8)

	if got := tr.duplicates.Load(); got != 1 {
		t.Errorf("duplicates = %d, want 1", got)
	}
	if gaps, missed := tr.gaps.Load(), tr.gapMessages.Load(); gaps != 1 || missed != 1 {
		t.Errorf("gaps = %d (%d messages), want 1 (1)", gaps, missed)
	}
	if lost, ex := tr.losses(); lost != 1 || len(ex) != 1 {
		t.Errorf("lost = %d %v, want 1", lost, ex)
	}
	if got := tr.unknown.Load(); got != 1 {
		t.Errorf("unknown = %d, want 1", got)
	}
	if got, want := tr.delivered.Load(), int64(5); got != want {
		t.Errorf("delivered = %d, want %d", got, want)
	}
	if got := tr.pending(); got != 1 {
		t.Errorf("pending = %d, want 1 (seq 2 to the receiver)", got)
	}
}
