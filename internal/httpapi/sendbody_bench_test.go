package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkAJSONAnswerWrite writes JSON answers of 1 KiB through
// sendBody on a real TCP connection whose client reads everything, so no
// write blocks and the watch of what the client acknowledged should cost
// (next to) nothing: "one answer" makes a sendBody per write, as
// serveEndpoint does per request; "one of many writes" writes them all
// through one, as a long answer does. The answers go out as one chunked
// stream.
func BenchmarkAJSONAnswerWrite(b *testing.B) {
	answer := append(bytes.Repeat([]byte(`{"id":12345,"body":"hello"},`), 1<<10/28), '\n')
	for _, fresh := range []bool{true, false} {
		name := "one of many writes"
		if fresh {
			name = "one answer"
		}
		b.Run(name, func(b *testing.B) {
			done := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(done)
				sb := &sendBody{ResponseWriter: w, rc: http.NewResponseController(w), idle: transferIdle, conn: connOf(r.Context())}
				b.ReportAllocs()
				for b.Loop() {
					if fresh {
						sb = &sendBody{ResponseWriter: w, rc: http.NewResponseController(w), idle: transferIdle, conn: connOf(r.Context())}
					}
					if _, err := sb.Write(answer); err != nil {
						b.Error(err)
						return
					}
				}
			}))
			srv.Config.ConnContext = ConnContext
			srv.Start()
			defer srv.Close()
			res, err := http.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			defer res.Body.Close()
			go func() { _, _ = io.Copy(io.Discard, res.Body) }()
			select {
			case <-done:
			case <-time.After(10 * time.Minute):
				b.Fatal("the answers were not written")
			}
		})
	}
}
