package client_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// TestAnUploadInFlightWhenTheClientClosesEndsWithIt: Close while an
// upload's PUT to the object store is under way. The upload ends with the
// client (ErrClosed, at once), as a send does, and sends no bytes after
// Close: it must not carry on and PUT the file again and again once its
// completion, an RPC, can only fail with ErrClosed.
func TestAnUploadInFlightWhenTheClientClosesEndsWithIt(t *testing.T) {
	var puts atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	g, alice := storeBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		if puts.Add(1) == 1 {
			close(started)
			<-release // the network is slow: Close comes first
		}
		return false
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	done := make(chan error, 1)
	go func() {
		_, err := alice.Upload(ctxFor(t, 60*time.Second), g.ID, "notes.txt", bytes.NewReader([]byte("sent while closing")))
		done <- err
	}()
	testkit.Receive(t, started, 20*time.Second, "the upload's PUT never reached the object store")
	closeClient(t, alice)
	closedAt := time.Now()
	close(release)
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrClosed) {
			t.Errorf("an upload in flight when the client closed returned %v, want ErrClosed", err)
		}
		if d := time.Since(closedAt); d > 2*time.Second {
			t.Errorf("the upload returned %v after Close, want at once", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the upload had not returned 30s after Close (%d PUTs so far)", puts.Load())
	}
	if n := puts.Load(); n != 1 {
		t.Errorf("the file was PUT %d times, %d of them after Close; want only the one under way", n, n-1)
	}

	// A download begun after Close does not fetch the file with the
	// closed client's token either.
	if _, err := alice.Download(ctxFor(t, 10*time.Second), "00000000-0000-0000-0000-000000000000", io.Discard); !errors.Is(err, client.ErrClosed) {
		t.Errorf("a download after Close returned %v, want ErrClosed", err)
	}
}
