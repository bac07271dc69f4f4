package hooks

import (
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// The budget hands out turns in arrival order at its rate: the burst at
// once, then one every 1/rate, and refuses once Queue are waiting.
func TestConnectBudgetPacesTurnsInOrderAndRefusesBeyondItsQueue(t *testing.T) {
	p := newPacer(ConnectBudget{Rate: 100, Queue: 5})
	now := time.Unix(1000, 0)
	var waits []time.Duration
	for i := 0; i < 15; i++ {
		w, ok := p.reserve(now)
		if !ok {
			waits = append(waits, -1)
			continue
		}
		waits = append(waits, w)
	}
	// burst = 10 (a tenth of a second), then 5 queued 10 ms apart, then refused.
	for i, w := range waits {
		var want time.Duration
		switch {
		case i < 10:
			want = 0
		case i < 15:
			want = time.Duration(i-9) * 10 * time.Millisecond
		}
		if w != want {
			t.Errorf("CONNECT %d: wait %v, want %v", i+1, w, want)
		}
	}
	if _, ok := p.reserve(now); ok {
		t.Error("a 6th waiting CONNECT was queued")
	}
	// 60 ms later the five waiting turns have come and a token refilled.
	if w, ok := p.reserve(now.Add(60 * time.Millisecond)); !ok || w != 0 {
		t.Errorf("after the queue drained: wait %v ok %v, want an immediate turn", w, ok)
	}
	if newPacer(ConnectBudget{}) != nil {
		t.Error("a zero budget paces")
	}
}

// A client whose connection closed without OnDisconnect (mochi skips it
// when the CONNACK cannot be written) must not hold a slot of the cap.
func TestConnectionCapDoesNotCountAClosedClientThatNeverDisconnected(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{})
	a, b, c := srv.NewClient(nil, "t", "a", false), srv.NewClient(nil, "t", "b", false), srv.NewClient(nil, "t", "c", false)
	var u userConns
	for _, cl := range []*mqtt.Client{a, b} {
		if ok, _ := u.admit(1, cl.ID, cl, 2); !ok {
			t.Fatalf("%s refused under the cap", cl.ID)
		}
	}
	if ok, _ := u.admit(1, "c", c, 2); ok {
		t.Fatal("third client id admitted over a cap of 2")
	}
	again := srv.NewClient(nil, "t", "a", false)
	if ok, _ := u.admit(1, "a", again, 2); !ok {
		t.Fatal("a held client id refused")
	}
	b.Stop(nil) // closed, no OnDisconnect
	ok, emptied := u.admit(1, "c", c, 2)
	if !ok || len(emptied) != 1 || emptied[0] != "b" {
		t.Fatalf("after b closed: admitted %v, emptied %v; want c admitted and b forgotten", ok, emptied)
	}
	if u.leave(1, "b", b) {
		t.Error("leave of a pruned client reported its client id as just emptied")
	}
	if u.leave(1, "a", a) {
		t.Error("leave of one of two clients of a reported the client id emptied")
	}
	if !u.leave(1, "a", again) {
		t.Error("leave of the last client of a did not report it emptied")
	}
	held, _ := u.held()
	if len(held[1]) != 1 || held[1][0] != "c" {
		t.Errorf("held %v, want user 1 holding c", held)
	}
}

// The refused are told to come back one turn apart at the budget's rate,
// after the turns promised already; the promises pass as time does, and
// none is later than maxComeBack.
func TestConnectBudgetSpreadsTheRefusedOverTheTurnsAfterThem(t *testing.T) {
	p := newPacer(ConnectBudget{Rate: 10, Queue: 0})
	now := time.Unix(1000, 0)
	if _, ok := p.reserve(now); !ok {
		t.Fatal("the burst's turn refused")
	}
	for i := 1; i <= 3; i++ {
		if _, ok := p.reserve(now); ok {
			t.Fatalf("CONNECT %d beyond the burst admitted", i)
		}
		if got, want := p.comeBack(), time.Duration(i)*100*time.Millisecond; got != want {
			t.Errorf("refused CONNECT %d told %v, want %v", i, got, want)
		}
	}
	// 200 ms later two of the three promised turns have passed.
	if _, ok := p.reserve(now.Add(200 * time.Millisecond)); !ok {
		t.Fatal("a refilled turn refused")
	}
	p.reserve(now.Add(200 * time.Millisecond))
	if got := p.comeBack(); got != 200*time.Millisecond {
		t.Errorf("after 200 ms: told %v, want 200ms", got)
	}
	for range 1000 {
		p.comeBack()
	}
	if got := p.comeBack(); got != maxComeBack {
		t.Errorf("after a storm: told %v, want the bound %v", got, maxComeBack)
	}
}
