package faults_test

import (
	"net"
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

// Another process (another package's test node, in a parallel test run)
// can take a port between freeAddr picking it and chatd binding it; the
// harness once counted that process's answers as chatd being up, and all
// of a test's clients then failed. The first start now moves to other
// ports, and a probe only counts if the chatd it started holds the port.
func TestProcStartMovesOffAPortTakenBeforeChatdBindsIt(t *testing.T) {
	p := newProc(t, pgtest.NewDB(t), nil)
	taken := p.MQTT
	squatter, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatalf("take %s: %v", taken, err)
	}
	defer squatter.Close()
	go func() {
		for {
			c, err := squatter.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	p.start()
	if p.MQTT == taken {
		t.Fatalf("chatd reported up on %s, which another process holds", taken)
	}
	if !listening(p.cmd.Process.Pid, p.MQTT) {
		t.Fatalf("chatd does not hold %s", p.MQTT)
	}
}
