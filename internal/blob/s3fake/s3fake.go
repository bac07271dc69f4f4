// Package s3fake runs an S3 server in-process on loopback for tests: the
// storage and protocol are github.com/johannesboyne/gofakes3 (in memory),
// and in front of it a strict AWS Signature Version 4 check, which
// gofakes3 does not make: every request must be signed with the server's
// key, in the Authorization header or as a presigned URL, and a presigned
// URL is refused once its X-Amz-Expires has passed. So tests see what a
// real S3 does with an unsigned guess, a tampered URL, a PUT of other
// bytes than the signed Content-Length and an expired URL.
//
// A Server is safe for concurrent use; Close stops it.
package s3fake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/chatd/chatd/internal/authparam"
	"github.com/chatd/chatd/internal/blob"
)

// Server is a running fake S3.
type Server struct {
	AccessKey, SecretKey, Bucket, Region string

	ln      net.Listener
	srv     *http.Server
	backend *s3mem.Backend

	mu     sync.Mutex
	offset time.Duration // added to the clock (expiry tests)

	refused atomic.Int64
	bytesIn atomic.Int64
}

// Start starts a fake S3 on 127.0.0.1 with bucket created.
func Start(bucket string) (*Server, error) {
	s := &Server{AccessKey: "chatd-test-key", SecretKey: "chatd-test-secret-0123456789", Bucket: bucket, Region: "us-east-1",
		backend: s3mem.New()}
	if err := s.backend.CreateBucket(bucket); err != nil {
		return nil, fmt.Errorf("create bucket: %w", err)
	}
	fake := gofakes3.New(s.backend, gofakes3.WithTimeSource(gofakes3.DefaultTimeSource()), gofakes3.WithLogger(gofakes3.DiscardLog()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.ln = ln
	inner := fake.Server()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			inner.ServeHTTP(w, r) // CORS preflight carries no signature
			return
		}
		if reason := s.verify(r); reason != "" {
			s.refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message></Error>`, reason)
			return
		}
		if r.Method == http.MethodPut && r.ContentLength > 0 {
			s.bytesIn.Add(r.ContentLength)
		}
		inner.ServeHTTP(w, r)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Endpoint is host:port, as minio-go and CHAT_S3_ENDPOINT take it.
func (s *Server) Endpoint() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Advance moves the server's clock forward (presigned URL expiry).
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
}

func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset)
}

// Refused counts the requests refused for their signature or expiry.
func (s *Server) Refused() int64 { return s.refused.Load() }

// BytesIn counts the bytes of accepted PUTs.
func (s *Server) BytesIn() int64 { return s.bytesIn.Load() }

// Admin is a client signed with the server's key, for what a test does
// beside chatd's store: another tool's objects and multipart uploads,
// listings chatd never makes.
func (s *Server) Admin() (*minio.Client, error) {
	return minio.New(s.Endpoint(), &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region})
}

// Config is the blob.S3Config of the server's bucket and key, its
// requests carried by transport (nil: the default).
func (s *Server) Config(transport http.RoundTripper) blob.S3Config {
	return blob.S3Config{Endpoint: s.Endpoint(), Bucket: s.Bucket, Region: s.Region,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, Transport: transport}
}

// FailingAborts carries requests to the server, failing the aborts of
// multipart uploads while On is set: the network gone when minio-go
// cleans up after a failed Put, or a key without
// s3:AbortMultipartUpload.
type FailingAborts struct{ On atomic.Bool }

// RoundTrip fails a multipart abort while On, else sends r.
func (a *FailingAborts) RoundTrip(r *http.Request) (*http.Response, error) {
	if a.On.Load() && r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Keys lists the bucket's objects.
func (s *Server) Keys() ([]string, error) {
	res, err := s.backend.ListBucket(s.Bucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range res.Contents {
		out = append(out, c.Key)
	}
	sort.Strings(out)
	return out, nil
}

const algorithm = "AWS4-HMAC-SHA256"

// verify checks r's Signature Version 4 and returns why it is refused
// ("" when it is good).
func (s *Server) verify(r *http.Request) string {
	q := r.URL.Query()
	var (
		credential, signedHeaders, signature, amzDate, payload string
		expires                                                int64
		presigned                                              = q.Get("X-Amz-Algorithm") != ""
	)
	if presigned {
		if q.Get("X-Amz-Algorithm") != algorithm {
			return "unsupported signature algorithm"
		}
		credential, signedHeaders, signature, amzDate = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature"), q.Get("X-Amz-Date")
		e, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
		if err != nil || e <= 0 || e > 7*24*3600 {
			return "X-Amz-Expires is malformed"
		}
		expires = e
		payload = "UNSIGNED-PAYLOAD"
	} else {
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, algorithm+" ") {
			return "Access Denied: the request is not signed"
		}
		params := authparam.Parse(strings.TrimPrefix(auth, algorithm+" "))
		credential, signedHeaders, signature = params["Credential"], params["SignedHeaders"], params["Signature"]
		amzDate = r.Header.Get("X-Amz-Date")
		payload = r.Header.Get("X-Amz-Content-Sha256")
		if payload == "" {
			return "x-amz-content-sha256 is missing"
		}
	}
	scope := strings.SplitN(credential, "/", 2)
	if len(scope) != 2 || scope[0] != s.AccessKey {
		return "The AWS Access Key Id you provided does not exist in our records."
	}
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return "X-Amz-Date is malformed"
	}
	now := s.now()
	if presigned {
		if now.After(at.Add(time.Duration(expires) * time.Second)) {
			return "Request has expired"
		}
	} else if d := now.Sub(at); d > 15*time.Minute || d < -15*time.Minute {
		return "RequestTimeTooSkewed"
	}
	canon := canonicalRequest(r, q, signedHeaders, payload, presigned)
	toSign := algorithm + "\n" + amzDate + "\n" + scope[1] + "\n" + hexSHA(canon)
	parts := strings.Split(scope[1], "/") // date/region/service/aws4_request
	if len(parts) != 4 {
		return "credential scope is malformed"
	}
	key := mac([]byte("AWS4"+s.SecretKey), parts[0])
	for _, p := range parts[1:] {
		key = mac(key, p)
	}
	want := hex.EncodeToString(mac(key, toSign))
	if !hmac.Equal([]byte(want), []byte(signature)) {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}

func canonicalRequest(r *http.Request, q url.Values, signedHeaders, payload string, presigned bool) string {
	if presigned {
		q = cloneValues(q)
		q.Del("X-Amz-Signature")
	}
	query := strings.ReplaceAll(q.Encode(), "+", "%20")
	var hdr strings.Builder
	for _, h := range strings.Split(signedHeaders, ";") {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = strconv.FormatInt(r.ContentLength, 10)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		hdr.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	return strings.Join([]string{r.Method, s3utils.EncodePath(r.URL.Path), query, hdr.String(), signedHeaders, payload}, "\n")
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func mac(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func hexSHA(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
