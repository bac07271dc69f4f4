package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	chat "github.com/chatd/chatd"
)

// S3Config names an S3-compatible bucket and how to reach it.
type S3Config struct {
	Endpoint  string // host[:port], e.g. s3.eu-west-1.amazonaws.com or minio:9000
	Bucket    string
	Region    string // e.g. us-east-1; set it so no request asks the bucket's location
	AccessKey string
	SecretKey string
	UseTLS    bool
	// Transport, when set, carries chatd's own requests (tests).
	Transport http.RoundTripper
}

// S3 stores blobs as objects of one bucket. The bucket must not be
// public: members reach objects only through the short-lived presigned
// URLs chatd hands out after checking membership.
type S3 struct {
	c      *minio.Client
	bucket string
}

var _ chat.BlobStore = (*S3)(nil)

// s3PartSize bounds what a Put of unknown-size parts buffers: chatd's own
// writes (thumbnails, a rewritten original) stream through it.
const s3PartSize = 5 << 20

// NewS3 connects to the bucket and checks that it exists, so a wrong
// endpoint, key or bucket name fails at start-up, not at the first upload.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.UseTLS,
		Region:    cfg.Region,
		Transport: cfg.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("check s3 bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("s3 bucket %q does not exist at %s", cfg.Bucket, cfg.Endpoint)
	}
	return &S3{c: c, bucket: cfg.Bucket}, nil
}

// Put uploads exactly size bytes; a reader with more is refused (and the
// object removed again).
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if !validKey(key) {
		return errKey(key)
	}
	counted := &countReader{r: r}
	_, err := s.c.PutObject(ctx, s.bucket, key, io.LimitReader(counted, size), size,
		minio.PutObjectOptions{ContentType: contentType, PartSize: s3PartSize})
	if err != nil {
		if counted.n < size && counted.eof {
			return fmt.Errorf("%w: %d of %d bytes", chat.ErrBlobSize, counted.n, size)
		}
		return fmt.Errorf("put s3 object: %w", err)
	}
	if err := probeEnd(r); err != nil {
		_ = s.Delete(context.WithoutCancel(ctx), key)
		return err
	}
	return nil
}

type countReader struct {
	r   io.Reader
	n   int64
	eof bool
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if errors.Is(err, io.EOF) {
		c.eof = true
	}
	return n, err
}

func notFound(err error) bool {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code == "NoSuchKey" || er.StatusCode == http.StatusNotFound
	}
	return false
}

// Open reads an object; seeks and ReadAt are range requests.
func (s *S3) Open(ctx context.Context, key string) (chat.BlobReader, error) {
	if !validKey(key) {
		return nil, errKey(key)
	}
	obj, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get s3 object: %w", err)
	}
	if _, err := obj.Stat(); err != nil {
		_ = obj.Close()
		if notFound(err) {
			return nil, chat.ErrBlobNotFound
		}
		return nil, fmt.Errorf("get s3 object: %w", err)
	}
	return obj, nil
}

// Stat reads an object's size and time.
func (s *S3) Stat(ctx context.Context, key string) (chat.BlobInfo, error) {
	if !validKey(key) {
		return chat.BlobInfo{}, errKey(key)
	}
	oi, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if notFound(err) {
			return chat.BlobInfo{}, chat.ErrBlobNotFound
		}
		return chat.BlobInfo{}, fmt.Errorf("stat s3 object: %w", err)
	}
	return chat.BlobInfo{Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Delete removes an object; S3 answers a missing one with success too.
func (s *S3) Delete(ctx context.Context, key string) error {
	if !validKey(key) {
		return errKey(key)
	}
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil && !notFound(err) {
		return fmt.Errorf("delete s3 object: %w", err)
	}
	return nil
}

// List lists every object of the bucket.
func (s *S3) List(ctx context.Context, fn func(key string) error) error {
	// The iterator, not ListObjects: stopped early (fn failed), the
	// latter's goroutine blocks for ever sending its ctx error into a
	// channel nobody reads any more.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for oi := range s.c.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("list s3 objects: %w", oi.Err)
		}
		if err := fn(oi.Key); err != nil {
			return err
		}
	}
	return nil
}

// AbortIncomplete aborts the multipart uploads of chatd's keys begun
// before before: a Put over s3PartSize is one, which minio-go aborts when
// it fails but which a crash, or an abort that failed too, leaves behind.
// Listing them takes s3:ListBucketMultipartUploads, aborting
// s3:AbortMultipartUpload. Others' keys, if the bucket has any, are left
// alone.
func (s *S3) AbortIncomplete(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	uploads := s.c.ListIncompleteUploads(ctx, s.bucket, "", true)
	defer func() {
		// Stopped early (the limit, a failed abort), the listing
		// goroutine ends by sending ctx's error, which blocks forever
		// on a channel nobody reads: one goroutine lost per round.
		cancel()
		for range uploads {
		}
	}()
	core := minio.Core{Client: s.c}
	n := 0
	for u := range uploads {
		if u.Err != nil {
			return n, fmt.Errorf("list s3 multipart uploads: %w", u.Err)
		}
		if !validKey(u.Key) || !u.Initiated.Before(before) {
			continue
		}
		if err := core.AbortMultipartUpload(ctx, s.bucket, u.Key, u.UploadID); err != nil && !noSuchUpload(err) {
			return n, fmt.Errorf("abort s3 multipart upload of %s: %w", u.Key, err)
		}
		if n++; n >= limit {
			break
		}
	}
	return n, nil
}

// noSuchUpload: the multipart upload is gone already (completed or
// aborted meanwhile).
func noSuchUpload(err error) bool {
	var er minio.ErrorResponse
	return errors.As(err, &er) && (er.Code == "NoSuchUpload" || er.StatusCode == http.StatusNotFound)
}

// Origin is the scheme and host of the URLs the store presigns, which
// browsers upload to and download from: the endpoint's for most stores,
// but at Amazon S3 (and Google Cloud Storage) minio-go names the bucket
// and its region in the host (https://bucket.s3.dualstack.eu-west-1.amazonaws.com).
// Presigning needs no request once the bucket's region is known (set, or
// asked by NewS3).
func (s *S3) Origin(ctx context.Context) (string, error) {
	u, err := s.c.PresignedGetObject(ctx, s.bucket, "origin", time.Minute, nil)
	if err != nil {
		return "", fmt.Errorf("presign s3 get: %w", err)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Direct is true: clients move the bytes with presigned URLs.
func (s *S3) Direct() bool { return true }

// PresignPut signs a PUT of exactly size bytes of contentType: the
// signature covers Content-Length and Content-Type, so the object store
// refuses anything else.
func (s *S3) PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, map[string]string, error) {
	if !validKey(key) {
		return "", nil, errKey(key)
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	u, err := s.c.PresignHeader(ctx, http.MethodPut, s.bucket, key, ttl, nil, h)
	if err != nil {
		return "", nil, fmt.Errorf("presign s3 put: %w", err)
	}
	// Content-Length is the body's own length; clients set only the type.
	return u.String(), map[string]string{"Content-Type": contentType}, nil
}

// PresignGet signs a GET answered with the given Content-Type and
// Content-Disposition (response-* overrides of S3).
func (s *S3) PresignGet(ctx context.Context, key string, ttl time.Duration, contentType, disposition string) (string, error) {
	if !validKey(key) {
		return "", errKey(key)
	}
	q := url.Values{}
	if contentType != "" {
		q.Set("response-content-type", contentType)
	}
	if disposition != "" {
		q.Set("response-content-disposition", disposition)
	}
	u, err := s.c.PresignedGetObject(ctx, s.bucket, key, ttl, q)
	if err != nil {
		return "", fmt.Errorf("presign s3 get: %w", err)
	}
	return u.String(), nil
}
