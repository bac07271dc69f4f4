package client_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// An object store that shows an object late: it answered the PUT 200,
// but chatd's first look under the URL (the completion's HEAD) finds
// nothing, as a store without read-after-write consistency answers. The
// upload is still pending and the bucket holds the bytes: Upload
// completes them on its next attempt, rather than fail (the caller's
// Upload again took a new ticket and stored the file twice, charged
// twice against the day's bytes). One PUT, one upload.
func TestAnObjectStoreUploadTheStoreShowsLateIsCompletedOnTheNextAttempt(t *testing.T) {
	t.Parallel()
	puts := &atomic.Int32{}
	var mu sync.Mutex
	late := map[string]bool{} // objects PUT whose first HEAD is answered 404
	srv := chatdOnFrontedStore(t, func(w http.ResponseWriter, r *http.Request, rp http.Handler) {
		mu.Lock()
		hide := r.Method == http.MethodHead && late[r.URL.Path]
		delete(late, r.URL.Path)
		mu.Unlock()
		if hide {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != "" {
			puts.Add(1)
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				mu.Lock()
				late[r.URL.Path] = true
				mu.Unlock()
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		rp.ServeHTTP(w, r)
	})
	g := groupOf12(t, srv)
	alice := connect(t, testConfig(t, "mqtt://"+srv.MQTTAddr(), 1))
	ctx := ctxFor(t, 30*time.Second)
	data := []byte("the agenda, which the store shows a moment late\n")
	a, err := alice.Upload(ctx, g.ID, "agenda.txt", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload whose bytes the store showed late: %v", err)
	}
	if a.Size != int64(len(data)) {
		t.Fatalf("Upload returned %+v, want the %d bytes sent", a, len(data))
	}
	uploadedOnce(t, ctx, srv, alice, g.ID, a, len(data), puts)
}
