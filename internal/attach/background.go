package attach

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/promreg"
)

// enqueue hands rec's thumbnail to the workers without blocking, unless
// one of its blob is queued or being made already; done is closed once
// it is made or failed. false when the queue is full (the cleanup loop
// finds it again).
func (s *Service) enqueue(rec chat.UploadRecord) (done <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.thumbs[rec.BlobKey]; ok {
		return d, true
	}
	d := make(chan struct{})
	select {
	case s.jobs <- thumbJob{rec: rec, done: d}:
		// A worker takes it off s.thumbs, under s.mu: after this.
		s.thumbs[rec.BlobKey] = d
		return d, true
	default:
		s.metrics.thumbnails.WithLabelValues("deferred").Inc()
		return nil, false
	}
}

// thumbnailer makes thumbnails until Close.
func (s *Service) thumbnailer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case j := <-s.jobs:
			s.thumbnail(j.rec)
			s.mu.Lock()
			delete(s.thumbs, j.rec.BlobKey)
			s.mu.Unlock()
			close(j.done)
		}
	}
}

// thumbnail makes and stores one thumbnail. A failure to decode is
// recorded (the attachment is shown without one); a failure of the stores
// leaves it pending for the next round.
func (s *Service) thumbnail(rec chat.UploadRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), s.thumbTimeout)
	defer cancel()
	start := time.Now()
	r, err := s.cfg.Blobs.Open(ctx, rec.BlobKey)
	if err != nil {
		if !errors.Is(err, chat.ErrBlobNotFound) {
			s.log.Warn("thumbnail: read the original", "attachment", rec.ID, "err", err)
			s.metrics.thumbnails.WithLabelValues("retry").Inc()
			return
		}
		r = nil
	}
	var (
		img []byte
		th  chat.Thumbnail
	)
	var read *storeReader
	if r != nil {
		read = &storeReader{BlobReader: r}
		r = read
		head := make([]byte, min(rec.DeclaredSize, media.HeadLen))
		_, _ = r.ReadAt(head, 0)
		orientation := media.Orientation(r, rec.DeclaredSize, rec.ContentType, head)
		var cost int64
		cost, err = media.ThumbnailCost(bufio.NewReaderSize(io.NewSectionReader(r, 0, rec.DeclaredSize), 64<<10), rec.ContentType)
		if err == nil && cost > s.budgetBytes {
			err = fmt.Errorf("%w: %d MiB, the thumbnailers' budget is %d MiB", media.ErrTooCostly, cost>>20, s.budgetBytes>>20)
		}
		if err == nil {
			// Within the budget the workers share: wait for what
			// the others hold to be released.
			if err := s.budget.Acquire(ctx, cost); err != nil {
				_ = r.Close()
				s.metrics.thumbnails.WithLabelValues("retry").Inc()
				return
			}
			if _, err = r.Seek(0, io.SeekStart); err == nil {
				img, th, err = media.Thumbnail(r, rec.ContentType, s.cfg.Limits.MaxPixels, orientation)
			}
			s.budget.Release(cost)
		}
		_ = r.Close()
	}
	if read != nil && read.err != nil {
		// The store failed, not the image: pending still, for the
		// next round.
		s.log.Warn("thumbnail: read the original", "attachment", rec.ID, "err", read.err)
		s.metrics.thumbnails.WithLabelValues("retry").Inc()
		return
	}
	// The image is read and decoded (or not): what is left is the
	// stores' (hold its blob's deletion, write the thumbnail, record the
	// outcome), under a deadline of its own. However long the decoding
	// took, its outcome is kept, not thrown away for the next round to
	// decode the image again, and again.
	ctx, cancel = context.WithTimeout(context.Background(), s.thumbTimeout)
	defer cancel()
	var result *chat.Thumbnail
	switch {
	case r == nil:
		// The original is gone (deleted): record the failure, which
		// also queues the blobs again if the attachment is gone too.
	case err != nil:
		s.log.Info("thumbnail: the image cannot be decoded; shown without one", "attachment", rec.ID, "err", err)
	default:
		// Until the thumbnail can no longer be written (this job's
		// deadline, and a minute), its blob's deletion waits: one that
		// ran meanwhile (a recall, an expiry) would miss it, and a
		// crash before it is recorded would leave it named by nothing.
		// Queued, the blob goes then with its thumbnail unless a live
		// attachment still names it (then the row is forgotten).
		deadline, _ := ctx.Deadline()
		if err := s.cfg.Store.QueueBlobDeletion(ctx, rec.BlobKey, "thumbnail being made", deadline.Add(time.Minute)); err != nil {
			s.log.Warn("thumbnail: hold its blob's deletion", "attachment", rec.ID, "err", err)
			s.metrics.thumbnails.WithLabelValues("retry").Inc()
			return
		}
		if err := s.cfg.Blobs.Put(ctx, chat.ThumbnailKey(rec.BlobKey), bytes.NewReader(img), int64(len(img)), "image/jpeg"); err != nil {
			s.log.Warn("thumbnail: store it", "attachment", rec.ID, "err", err)
			s.metrics.thumbnails.WithLabelValues("retry").Inc()
			return
		}
		result = &th
	}
	live, err := s.cfg.Store.SetThumbnail(ctx, rec.ID, rec.BlobKey, result)
	if err != nil {
		s.log.Warn("thumbnail: record it", "attachment", rec.ID, "err", err)
		s.metrics.thumbnails.WithLabelValues("retry").Inc()
		return
	}
	outcome := "made"
	switch {
	case !live:
		outcome = "gone"
	case result == nil:
		outcome = "failed"
	}
	s.metrics.thumbnails.WithLabelValues(outcome).Inc()
	s.metrics.thumbSeconds.Observe(time.Since(start).Seconds())
}

// cleanup runs until Close: at once (what a crash left: thumbnails to
// make, deletions to finish), then every CleanupInterval.
func (s *Service) cleanup() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CleanupInterval)
	defer t.Stop()
	for {
		s.sweep()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// sweep drops expired uploads and past days' quotas, deletes the queued
// blobs and requeues thumbnails left pending.
func (s *Service) sweep() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		n, err := s.cfg.Store.ExpireUploads(ctx, time.Now().Add(-s.cfg.TTL), s.urlGrace(), 500)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("expire uploads", "err", err)
			}
			break
		}
		s.metrics.expired.Add(float64(n))
		if n < 500 {
			break
		}
	}
	if _, err := s.cfg.Store.ForgetPastQuotas(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("forget past upload quotas", "err", err)
	}
	for {
		n, err := s.cfg.Store.DeleteBlobs(ctx, 100, s.deletionRound())
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("delete blobs", "err", err)
			}
			break
		}
		s.metrics.deletions.Add(float64(n))
		if n == 0 {
			break
		}
	}
	s.abortIncomplete(ctx)
	if recs, err := s.cfg.Store.PendingThumbnails(ctx, cap(s.jobs)/2); err == nil {
		for _, r := range recs {
			if len(s.jobs) >= cap(s.jobs)/2 {
				break
			}
			s.enqueue(r)
		}
	} else if ctx.Err() == nil {
		s.log.Warn("read pending thumbnails", "err", err)
	}
}

// abortIncomplete removes, 100 a round, what writes begun longer ago than
// the TTL left unfinished in the blob store (an object store's multipart
// uploads a crash left: billed, and named by nothing the queue has). A
// store that refuses it, a key without the permission to list or abort
// them, is warned about once until it works again (the operator may
// use a lifecycle rule instead).
func (s *Service) abortIncomplete(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DeleteTimeout)
	defer cancel()
	n, err := s.cfg.Blobs.AbortIncomplete(ctx, time.Now().Add(-s.cfg.TTL), 100)
	s.metrics.aborted.Add(float64(n))
	switch {
	case err == nil:
		s.abortFailing.Store(false)
		if n > 0 {
			s.log.Info("aborted unfinished writes to the blob store", "count", n)
		}
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		// Stopping.
	case !s.abortFailing.Swap(true):
		s.log.Warn("abort unfinished writes to the blob store (the key may lack s3:ListBucketMultipartUploads and s3:AbortMultipartUpload; warned once until it works)", "err", err)
	default:
		s.log.Debug("abort unfinished writes to the blob store", "err", err)
	}
}

// deletionRound returns the deletion of one DeleteBlobs round: each blob
// and its thumbnail (both idempotent) within DeleteTimeout. The round
// holds its queue rows in an open transaction, which a store that does
// not answer must not keep open: once one deletion timed out, the rest
// of the round fail at once (and back off, as the one that timed out).
func (s *Service) deletionRound() func(ctx context.Context, key string) error {
	var stalled error
	return func(ctx context.Context, key string) error {
		if stalled != nil {
			return fmt.Errorf("not tried: %w", stalled)
		}
		dctx, cancel := context.WithTimeout(ctx, s.cfg.DeleteTimeout)
		defer cancel()
		err := s.cfg.Blobs.Delete(dctx, key)
		if err == nil {
			err = s.cfg.Blobs.Delete(dctx, chat.ThumbnailKey(key))
		}
		if err != nil && ctx.Err() == nil && errors.Is(dctx.Err(), context.DeadlineExceeded) {
			stalled = fmt.Errorf("the blob store did not answer within %s: %w", s.cfg.DeleteTimeout, err)
			return stalled
		}
		return err
	}
}

// Sweep runs one cleanup round now (tests, and operators through chatctl
// in the future).
func (s *Service) Sweep() { s.sweep() }

type metrics struct {
	uploads      *prometheus.CounterVec
	downloads    *prometheus.CounterVec
	thumbnails   *prometheus.CounterVec
	thumbSeconds prometheus.Histogram
	bytesIn      prometheus.Counter
	expired      prometheus.Counter
	deletions    prometheus.Counter
	aborted      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		uploads: promreg.CounterVec("chat_uploads_total",
			"Uploads by outcome: created, complete, cut (PUT cut short, pending still), expired (a PUT still sending when the upload's URL expired: 410, the upload as it was), too_large, unsupported, quota, refused_* (the bytes were not as declared: sniff, size, image), again (a complete upload PUT again with its bytes: answered as the first, nothing stored), again_other (PUT again with other bytes: 409), busy (a PUT refused while PutsPerUser of its user's run: 429).", "outcome"),
		downloads: promreg.CounterVec("chat_attachment_downloads_total",
			"Attachment downloads by what (original, thumbnail) and how (served by chatd, redirect to the object store).", "what", "how"),
		thumbnails: promreg.CounterVec("chat_thumbnails_total",
			"Thumbnails by outcome: made, failed (not decodable), gone (the attachment went), retry (a store failed), deferred (queue full).", "outcome"),
		thumbSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chat_thumbnail_seconds",
			Help: "Time to make one thumbnail (read, decode, scale, encode, store).", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		bytesIn: promreg.Counter("chat_upload_bytes_total",
			"Bytes received by chatd's own upload endpoint (local disk store)."),
		expired: promreg.Counter("chat_uploads_expired_total",
			"Uploads never attached and deleted after upload_ttl."),
		deletions: promreg.Counter("chat_blob_deletions_total",
			"Blobs deleted from the blob store (with their thumbnails) through the deletion queue."),
		aborted: promreg.Counter("chat_blob_incomplete_aborted_total",
			"Unfinished writes (an object store's multipart uploads a crash left) older than upload_ttl, aborted by the cleanup."),
	}
	if err := promreg.Register(reg, m.uploads, m.downloads, m.thumbnails, m.thumbSeconds, m.bytesIn, m.expired, m.deletions, m.aborted); err != nil {
		return nil, fmt.Errorf("register attachment metrics: %w", err)
	}
	return m, nil
}
