package server_test

import (
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
)

// A CONNECT that waited its whole send timeout for its client id's turn,
// another CONNECT of the id still taking an old connection over, is
// refused as unavailable (0x88) but counted apart: the database answered,
// and an operator alerting on unavailable connects looks at it, not at a
// client reconnecting faster than its previous attempt finished.
func TestAConnectThatWaitedOutItsClientIDsTurnIsCountedAsClientIDBusy(t *testing.T) {
	t.Parallel()
	// A send timeout shorter than the takeover's second.
	srv, conv := startDirect(t, map[string]string{"CHAT_MAX_BODY_BYTES": "1048576", "CHAT_SEND_TIMEOUT": "600ms"})
	fullPhone(t, srv, conv.ID)
	first := takeOverFullPhone(t, srv)
	unavailable := connects(t, srv, "unavailable")

	c, ack, err := mqtttest.Dial(srv.MQTTAddr(), phoneOptions(t))
	if err == nil {
		c.Drop()
	}
	if ack.ReasonCode != packets.ErrServerUnavailable.Code {
		t.Fatalf("a CONNECT while another of its client id takes over: CONNACK 0x%02x (%v), want 0x88", ack.ReasonCode, err)
	}
	if n := connects(t, srv, "client_id_busy"); n != 1 {
		t.Errorf(`chat_mqtt_connects_total{outcome="client_id_busy"} = %v, want 1`, n)
	}
	if n := connects(t, srv, "unavailable"); n != unavailable {
		t.Errorf(`chat_mqtt_connects_total{outcome="unavailable"} = %v, want %v`, n, unavailable)
	}
	first.Wait(t)
}
