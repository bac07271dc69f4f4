package server

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/attach"
	"github.com/chatd/chatd/internal/blob"
	"github.com/chatd/chatd/store"
)

// BlobDir is where the local disk store keeps attachments, in the data
// dir the node owns (its lock keeps other processes out).
func BlobDir(dataDir string) string { return filepath.Join(dataDir, "blobs") }

// startAttachments opens the blob store (S3 when configured, else local
// disk), starts the attachment subsystem and hands it to the Service.
func (s *Server) startAttachments(ctx context.Context, st config.Settings) error {
	var err error
	if st.S3Endpoint != "" {
		if s.Blobs, err = blob.NewS3(ctx, blob.S3Config{Endpoint: st.S3Endpoint, Bucket: st.S3Bucket, Region: st.S3Region,
			AccessKey: st.S3AccessKey, SecretKey: st.S3SecretKey, UseTLS: st.S3UseTLS}); err != nil {
			return fmt.Errorf("attachments: %w; check s3_endpoint, s3_bucket and the keys (or unset s3_endpoint for local disk)", err)
		}
	} else if s.Blobs, err = blob.NewLocal(BlobDir(st.DataDir)); err != nil {
		return fmt.Errorf("attachments: %w", err)
	}
	if s.objectOrigin, err = objectStoreOrigin(ctx, s.Blobs); err != nil {
		return err
	}
	s.attachStore = store.NewAttachments(s.Pool)
	s.Attachments, err = attach.New(attach.Config{Store: s.attachStore, Blobs: s.Blobs, Limits: st.UploadLimits(),
		QuotaBytesPerDay: st.UploadBytesPerDay, URLExpiry: st.UploadURLExpiry, DownloadExpiry: st.DownloadURLExpiry,
		TTL: st.UploadTTL, ThumbnailWorkers: st.ThumbnailWorkers, ThumbnailWait: s.thumbnailWait, Logger: s.log.With("component", "attachments"),
		Registerer: s.Registry})
	if err != nil {
		return err
	}
	s.Registry.MustRegister(dbGauge(prometheus.GaugeOpts{
		Name: "chat_blob_deletions_pending",
		Help: "Blobs queued for deletion (recalled, expired or refused attachments) and not deleted yet; growing means the blob store refuses deletes. -1: the count failed or took over 2 s.",
	}, func(ctx context.Context) float64 {
		n, err := s.attachStore.PendingBlobDeletions(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
	s.Attachments.Start()
	s.Service.Attachments = s.Attachments
	where := "local disk " + BlobDir(st.DataDir)
	if st.S3Endpoint != "" {
		where = "s3 " + st.S3Endpoint + "/" + st.S3Bucket
	}
	s.log.Info("attachments", "store", where, "max_upload_bytes", st.MaxUploadBytes, "upload_ttl", st.UploadTTL)
	return nil
}

// objectStoreOrigin is the origin browsers upload to and download from
// when attachments live in an object store (the web client's CSP must
// allow it): where its presigned URLs point, which at Amazon S3 is the
// bucket's own host, not the endpoint. None for local disk.
func objectStoreOrigin(ctx context.Context, blobs chat.BlobStore) ([]string, error) {
	s3, ok := blobs.(*blob.S3)
	if !ok {
		return nil, nil
	}
	o, err := s3.Origin(ctx)
	if err != nil {
		return nil, fmt.Errorf("attachments: the object store's origin: %w", err)
	}
	return []string{o}, nil
}
