package testkit

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeAddrIsBelowTheEphemeralRangeOutgoingConnectionsUse(t *testing.T) {
	low := ephemeralLow()
	for range 50 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < freeFloor || port >= low {
			t.Fatalf("FreeAddr gave %s: outside %d-%d, where an outgoing connection may take it before the test binds it", addr, freeFloor, low-1)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr gave %s, which cannot be bound: %v", addr, err)
		}
		ln.Close()
	}
}
