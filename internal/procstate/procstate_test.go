package procstate

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A child that exited but was not waited for is a zombie: kill(pid, 0)
// still succeeds, but it runs nothing. Waited for, it is gone.
func TestOfTellsARunningProcessAZombieAndAGoneOneApart(t *testing.T) {
	if st, _ := Of(os.Getpid()); st != Running {
		t.Fatalf("this process: %v, want running", st)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if st, name := Of(pid); st != Running || name != "sleep" {
		t.Fatalf("live child: %v %q, want running sleep", st, name)
	}
	_ = cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, name := Of(pid)
		if st == Zombie {
			if name != "sleep" {
				t.Errorf("zombie's name %q, want sleep", name)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed, unreaped child: %v, want zombie", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Wait()
	if st, _ := Of(pid); st != Gone {
		t.Fatalf("reaped child: %v, want gone", st)
	}
}

func TestInDirTellsAProcesssWorkingDirectory(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if in, known := InDir(os.Getpid(), wd); !in || !known {
		t.Errorf("InDir(self, %s) = %v, %v; want true, true", wd, in, known)
	}
	other := t.TempDir()
	if in, known := InDir(os.Getpid(), other); in || !known {
		t.Errorf("InDir(self, %s) = %v, %v; want false, true", other, in, known)
	}
	if _, known := InDir(0, wd); known {
		t.Error("InDir(0) is known")
	}
}
