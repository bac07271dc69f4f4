package server_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/server"
)

// bucketThere answers S3's "does the bucket exist" (HEAD) for a bucket
// this test cannot reach: presigning itself needs no network.
type bucketThere struct{}

func (bucketThere) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// At Amazon S3 the URLs chatd presigns name the bucket in the host
// (https://bucket.s3.region.amazonaws.com/key): the web client's
// Content-Security-Policy must admit that origin, not the endpoint's, or
// the browser refuses every upload and download.
func TestTheWebClientMayUploadToAndDownloadFromABucketAtAmazonS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := config.Settings{AttachmentSettings: config.AttachmentSettings{S3Endpoint: "s3.eu-west-1.amazonaws.com", S3Bucket: "chatd-files",
		S3Region: "eu-west-1", S3AccessKey: "AKIDEXAMPLE", S3SecretKey: "secret", S3UseTLS: true}}
	blobs, err := blob.NewS3(ctx, blob.S3Config{Endpoint: st.S3Endpoint, Bucket: st.S3Bucket, Region: st.S3Region,
		AccessKey: st.S3AccessKey, SecretKey: st.S3SecretKey, UseTLS: st.S3UseTLS, Transport: bucketThere{}})
	if err != nil {
		t.Fatal(err)
	}
	key := chat.NewBlobKey()
	put, _, err := blobs.PresignPut(ctx, key, "image/png", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	get, err := blobs.PresignGet(ctx, key, time.Minute, "image/png", `inline; filename="a.png"`)
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := server.ObjectStoreOrigin(ctx, blobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{put, get} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if origin := u.Scheme + "://" + u.Host; !slices.Contains(allowed, origin) {
			t.Errorf("the browser is sent to %s, but connect-src admits only %q besides its own origin", origin, allowed)
		}
	}
}

// A node on an S3-compatible store (path-style URLs: the endpoint's
// origin) serves its page with a policy that admits where the upload
// ticket sends the browser.
func TestTheWebClientsPolicyAdmitsWhereAnUploadTicketSendsTheBrowser(t *testing.T) {
	t.Parallel()
	n := startAttachNode(t, true, nil)
	page := n.call(t, 0, http.MethodGet, "/", nil, nil)
	csp := page.header.Get("Content-Security-Policy")
	_, connect, _ := strings.Cut(csp, "connect-src ")
	connect, _, _ = strings.Cut(connect, ";")
	cid := decode[struct{ ID int64 }](t, n.call(t, 1, http.MethodPost, "/v1/direct/2", nil, nil)).ID
	ticket := decode[struct{ URL string }](t, n.call(t, 1, http.MethodPost, "/v1/uploads",
		map[string]any{"conversationId": cid, "name": "a.png", "contentType": "image/png", "size": 100}, nil))
	u, err := url.Parse(ticket.URL)
	if err != nil {
		t.Fatal(err)
	}
	if origin := u.Scheme + "://" + u.Host; !slices.Contains(strings.Fields(connect), origin) {
		t.Errorf("the ticket sends the browser to %s, connect-src is %q", origin, connect)
	}
}
