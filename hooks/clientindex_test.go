package hooks

import (
	"fmt"
	"runtime"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/chatd/chatd/internal/testkit"
)

// The hook holds a record of every connection for as long as it is open,
// so what its index spends per entry is memory an idle connection holds
// (issue 24: at most 32 KiB a connection in all).
func TestTheHooksRecordOfAConnectionCostsItsIndexLittle(t *testing.T) {
	var h Chat
	const n = 20000
	clients := make([]*mqtt.Client, n)
	infos := make([]*clientInfo, n)
	for i := range clients {
		clients[i] = &mqtt.Client{ID: fmt.Sprint("c", i)}
		infos[i] = &clientInfo{userID: int64(i + 1)}
	}
	base := testkit.LiveHeap()
	for i, cl := range clients {
		h.clients.Store(cl, infos[i])
	}
	per := (testkit.LiveHeap() - base) / n
	t.Logf("%d bytes of index per connection", per)
	for i, cl := range clients {
		if h.info(cl) != infos[i] {
			t.Fatalf("client %d: wrong record", i)
		}
	}
	if per > 64 {
		t.Fatalf("%d bytes of index per connection, want at most 64", per)
	}
	seen := 0
	h.clients.Range(func(cl *mqtt.Client, ci *clientInfo) bool {
		seen++
		if ci.userID%2 == 0 {
			h.clients.Delete(cl) // as sync.Map's Range allows
		}
		return true
	})
	if seen != n {
		t.Fatalf("Range saw %d clients, want %d", seen, n)
	}
	for i, cl := range clients {
		if got, want := h.info(cl) != nil, (i+1)%2 == 1; got != want {
			t.Fatalf("client %d: held %v after the deletes, want %v", i, got, want)
		}
	}
	runtime.KeepAlive(infos)
}
