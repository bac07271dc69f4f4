package hooks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testkit"
)

// Two users with requests that wait take half of the workers each, all
// but one: the last idle worker is kept for a user with none running,
// whose request starts at once instead of after one of theirs.
func TestAnRPCPoolKeepsAWorkerForAUserWithNoRequestRunning(t *testing.T) {
	p := newRPCPool(8, 256)
	block := make(chan struct{})
	started := make(chan int64, 16)
	for _, u := range []int64{1, 2} {
		for range 8 {
			if !p.submit(u, func() { started <- u; <-block }) {
				t.Fatalf("user %d's request refused", u)
			}
		}
	}
	for i := range 7 {
		testkit.Receive(t, started, 10*time.Second, fmt.Sprintf("%d of the two users' requests started, want 7", i))
	}
	ran := make(chan struct{})
	if !p.submit(3, func() { close(ran) }) {
		t.Fatal("the third user's request refused")
	}
	testkit.Receive(t, ran, 10*time.Second, "the third user's request did not start while the two users' requests ran")
	close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(started); n != 16-7 {
		t.Fatalf("%d more of the two users' requests ran after the release, want 9", n)
	}
}
