package faults_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/fleet"
)

// fleetProc is the fleet command (package internal/fleet) running phones
// for one test; its methods are one test goroutine's.
type fleetProc struct {
	t   testing.TB
	in  io.WriteCloser
	out *bufio.Scanner
}

// startFleet starts the fleet with these phones against the MQTT address;
// the test's cleanup ends it (every phone dropped).
func startFleet(t testing.TB, mqttAddr string, phones []fleet.Phone) *fleetProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(filepath.Dir(chatdBinary(t)), "fleet"))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the fleet: %v", err)
	}
	f := &fleetProc{t: t, in: in, out: bufio.NewScanner(out)}
	f.out.Buffer(make([]byte, 1<<20), 64<<20)
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fleet: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("fleet did not end within 30 s of its input")
		}
	})
	f.send(fleet.Setup{Addr: mqttAddr, Devices: phones})
	return f
}

func (f *fleetProc) send(v any) {
	f.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.in.Write(append(b, '\n')); err != nil {
		f.t.Fatalf("write to the fleet: %v", err)
	}
}

// do sends one command and decodes its reply into reply.
func (f *fleetProc) do(cmd fleet.Command, reply any) {
	f.t.Helper()
	f.send(cmd)
	if !f.out.Scan() {
		f.t.Fatalf("fleet ended without answering %q: %v", cmd.Op, f.out.Err())
	}
	if err := json.Unmarshal(f.out.Bytes(), reply); err != nil {
		f.t.Fatalf("fleet's answer to %q: %v", cmd.Op, err)
	}
}

// connect connects every phone, retrying until deadline.
func (f *fleetProc) connect(deadline time.Time) fleet.Connected {
	var res fleet.Connected
	f.do(fleet.Command{Op: "connect", Deadline: deadline.UnixMilli()}, &res)
	return res
}

// drop closes every phone's connection.
func (f *fleetProc) drop() { f.do(fleet.Command{Op: "drop"}, &struct{}{}) }

// missing is how many phones are not at seq in their conversation yet.
func (f *fleetProc) missing(seq int64) int {
	var r struct{ Missing int }
	f.do(fleet.Command{Op: "missing", Seq: seq}, &r)
	return r.Missing
}

// violations are the gaps the phones saw.
func (f *fleetProc) violations() []string {
	var r struct{ Violations []string }
	f.do(fleet.Command{Op: "violations"}, &r)
	return r.Violations
}
