package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
)

// CHAT_PPROF_ADDR is checked before the node starts: an address that does
// not parse is a bad setting (exit 2), one that cannot be listened on
// ends the start (exit 1), each naming the setting; neither leaves a node
// running without the profiler the operator asked for.
func TestAPprofAddressThatCannotServeStopsTheStartNamingIt(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name, addr string
		code       int
	}{
		{"no port", "127.0.0.1", 2},
		{"a port taken", busy.Addr().String(), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CHAT_DATABASE_URL": pgtest.NewDB(t), "CHAT_DATA_DIR": t.TempDir(),
				"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "off", "CHAT_PPROF_ADDR": tc.addr}
			// Bounded: a start that goes on serves until this ends.
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			code, _, errOut := chatd(t, ctx, env)
			if code != tc.code || !strings.Contains(errOut, "CHAT_PPROF_ADDR") {
				t.Fatalf("exit %d (want %d), stderr lacks CHAT_PPROF_ADDR:\n%s", code, tc.code, errOut)
			}
		})
	}
}
