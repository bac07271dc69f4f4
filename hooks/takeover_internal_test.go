package hooks

import (
	"strconv"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// Takeover notices naming connections of this node that are not listed
// (their disconnect could not clear their token: the database was away,
// and their clients now connect elsewhere) are remembered for a minute.
// A burst of them must cost each little, not a pass over all those
// remembered: notices are handled one at a time, and those queued behind
// a slow one leave duplicate connections open meanwhile.
func TestABurstOfTakeoverNoticesForConnectionsNotListedCostsEachLittle(t *testing.T) {
	h := New(Config{NodeID: "a"})
	h.Attach(mqtt.New(nil))
	const n = 50000
	limit := time.Second
	if raceEnabled {
		limit *= 10
	}
	start := time.Now()
	for i := range n {
		h.SessionTakenOver("client-"+strconv.Itoa(i), h.tokenPrefix+strconv.Itoa(i))
	}
	if d := time.Since(start); d > limit {
		t.Fatalf("%d takeover notices took %v, want under %v", n, d, limit)
	}
}
