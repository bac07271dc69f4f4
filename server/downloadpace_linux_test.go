package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// downloadIdle is the nodes' transfer idle time in these tests (60 s in
// production).
const downloadIdle = 500 * time.Millisecond

// startDownload starts a node whose uploads and downloads idle for at most
// downloadIdle, uploads a file of size bytes as user 1 and asks for it
// on a connection whose receive buffer is small, as a phone's on a weak
// link is full: it answers the connection, a reader past the answer's
// header and the file's size.
func startDownload(t *testing.T, size int) (net.Conn, *bufio.Reader) {
	t.Helper()
	n := attachNode{Server: startNode(t, pgtest.NewDB(t), nil, server.WithTransferIdle(downloadIdle))}
	g := mustGroup(t, context.Background(), n.Server, 1, "files", []int64{2})
	file := bytes.Repeat([]byte("a line of text, long enough to fill the socket buffers\n"), size/55+1)[:size]
	u := n.upload(t, 1, g.ID, "big.txt", "text/plain", file)
	conn := dialWeakLink(t, n.HTTPAddr())
	if _, err := fmt.Fprintf(conn, "GET /v1/attachments/%s HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n\r\n", u.UploadID, testnode.Token(t, 1)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReaderSize(conn, 1<<10)
	res, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.ContentLength != int64(size) {
		t.Fatalf("download: %d, %d bytes", res.StatusCode, res.ContentLength)
	}
	return conn, rd
}

// TestADownloadReadSteadilyAboveTheMinimumGoesOn: a client that took far
// more than the minimum in every idle time was cut off as stalled. Once
// the server's send buffer (grown large on a fast start) is full, Linux
// wakes a blocked writer only when a third of it has drained, so one
// piece's write waited for that third at the client's pace, far longer
// than the idle time. What the client's TCP acknowledges while a write
// blocks now counts as taken. (The idle time is 120 times shorter than in
// production but the kernel's window steps are not, hence a pace of
// 160 KiB per idle time.)
func TestADownloadReadSteadilyAboveTheMinimumGoesOn(t *testing.T) {
	const tick = 100 * time.Millisecond
	const runFor = 12 * downloadIdle
	for _, perTick := range []int{32 << 10} {
		t.Run(fmt.Sprintf("%d KiB per %v", perTick>>10, tick), func(t *testing.T) {
			conn, rd := startDownload(t, 24<<20)
			// A fast start grows the server's send buffer (and the
			// client's receive window), then the link slows down.
			if _, err := io.CopyN(io.Discard, rd, 8<<20); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, perTick)
			took, start := 0, time.Now()
			for next := start; time.Since(start) < runFor; next = next.Add(tick) {
				<-time.After(time.Until(next))
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				m, err := io.ReadFull(rd, buf)
				took += m
				if err != nil {
					t.Fatalf("cut off after %v, %d KiB taken at %d KiB per %v (%d KiB per idle time of %v): %v",
						time.Since(start).Round(time.Millisecond), took>>10, perTick>>10, tick, perTick*int(downloadIdle/tick)>>10, downloadIdle, err)
				}
			}
			// Then the link is fast again: the rest of the file
			// arrives (a download cut off meanwhile ends short of it,
			// once the client has read what the server had sent).
			rest, err := io.Copy(io.Discard, rd)
			if got := 8<<20 + int64(took) + rest; got != 24<<20 {
				t.Fatalf("cut off while its client took %d KiB per %v (%d KiB per idle time of %v): %d of %d bytes, then %v",
					perTick>>10, tick, perTick*int(downloadIdle/tick)>>10, downloadIdle, got, 24<<20, err)
			}
		})
	}
}

// TestADownloadWhoseClientStopsReadingIsStillCutOff: keeping the unsent
// data small must not keep a client that takes nothing: its download
// still ends after the idle time, short of the file's end.
func TestADownloadWhoseClientStopsReadingIsStillCutOff(t *testing.T) {
	const size = 24 << 20
	conn, rd := startDownload(t, size)
	// The client takes nothing for several idle times, then all it can.
	<-time.After(4 * downloadIdle)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	took, err := io.Copy(io.Discard, rd)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading what was sent before the cut: %v", err)
	}
	if took >= size {
		t.Fatalf("a download whose client took nothing for %v (idle time %v) went on to its end", 4*downloadIdle, downloadIdle)
	}
}
