package attach

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media"
	"github.com/chatd/chatd/internal/shutdown"
)

// PutsPerUser bounds the PUTs of one user's uploads a node runs at once
// (one more is rate_limited). Each holds a connection, a goroutine and,
// once its bytes come, its buffers (up to about 600 KiB: the head, the
// copy, what media.Strip holds) and a temporary file, for as long as its
// client keeps sending; tickets alone (rate and bytes per day) let one
// user hold thousands. 16: a message carries at most chat.MaxAttachments
// files, which the web client sends at once, and another device or an
// avatar may be sending meanwhile. It is what clients do that sizes it,
// not the machine, so it is no setting.
const PutsPerUser = 16

// clockSkew is how far behind chatd's clock an object store's may be and
// still take chatd's own signed requests (S3 refuses one more than 15
// minutes off its clock: RequestTimeTooSkewed); so long after chatd and
// the database saw a presigned URL expire, the store may still take it.
const clockSkew = 15 * time.Minute

// putRetry is a refused PUT's Retry-After: a PUT of the user's may have
// ended by then (a 25 MiB file over a phone's link takes about that).
const putRetry = 10 * time.Second

// Config configures a Service; zero durations and counts take the
// defaults documented on each field.
type Config struct {
	Store chat.AttachmentStore
	Blobs chat.BlobStore
	// Limits: size, types and image pixels (chat defaults when zero).
	Limits chat.UploadLimits
	// QuotaBytesPerDay bounds the bytes a user declares per UTC day
	// (0: no quota).
	QuotaBytesPerDay int64
	// URLExpiry: how long an upload URL is valid (15m).
	URLExpiry time.Duration
	// DownloadExpiry: how long a presigned download URL is valid (5m).
	DownloadExpiry time.Duration
	// TTL: uploads never attached are deleted this long after they were
	// created (24h). It must be longer than URLExpiry.
	TTL time.Duration
	// ThumbnailWorkers bounds the images decoded at once (2). Together
	// they hold at most ThumbnailWorkers × Limits.MaxPixels × 4 bytes:
	// an image takes what media.ThumbnailCost says (from its header),
	// waiting while the others hold the rest, and one that needs more
	// than the whole budget gets no thumbnail.
	ThumbnailWorkers int
	// ThumbnailWait: how long completing an upload waits for its
	// thumbnail (5s).
	ThumbnailWait time.Duration
	// CleanupInterval: how often expired uploads are dropped and queued
	// blobs deleted (1m).
	CleanupInterval time.Duration
	// DeleteTimeout: how long one blob's deletion may wait for the blob
	// store (30s). A deletion round holds its queue rows in an open
	// transaction: once the store let one deletion time out, the round
	// tries no other and commits, the rest backing off as failed.
	DeleteTimeout time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// Service implements chat.Attachments.
type Service struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	// avatarTypes: what an avatar upload may be, the allowed types chatd
	// decodes and thumbnails (a picture every client can show, small).
	avatarTypes []string

	mu  sync.Mutex
	ops map[string]*op // uploads being written or completed
	// puts counts the PUTs running, by uploader (PutsPerUser).
	puts map[int64]int
	// thumbs: the thumbnails queued or being made, by blob (a forward's
	// copies share one), each with the channel closed once it is done.
	// The cleanup's round still reads them pending in PostgreSQL and must
	// not queue them again.
	thumbs map[string]chan struct{}

	// abortFailing: the last round's AbortIncomplete failed (warned).
	abortFailing atomic.Bool

	budget      *semaphore.Weighted // the thumbnailers' memory, in bytes
	budgetBytes int64
	// thumbTimeout bounds a thumbnail job's reading of the original and
	// the stores' work after it.
	thumbTimeout time.Duration

	jobs   chan thumbJob
	stop   chan struct{}
	wg     sync.WaitGroup
	start  sync.Once
	closed sync.Once
}

var _ chat.Attachments = (*Service)(nil)

// op is a PUT or completion of one upload in progress: a new PUT
// interrupts it (interrupt) and waits for it (done).
type op struct {
	interrupt func()
	done      chan struct{}
}

type thumbJob struct {
	rec  chat.UploadRecord
	done chan struct{} // closed when made or failed (s.thumbs)
}

// New checks cfg and returns a Service; Start starts its goroutines.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Blobs == nil {
		return nil, errors.New("attach: Store and Blobs are required")
	}
	if cfg.Limits.MaxBytes <= 0 {
		cfg.Limits.MaxBytes = chat.DefaultMaxUploadBytes
	}
	if len(cfg.Limits.Types) == 0 {
		cfg.Limits.Types = chat.DefaultUploadTypes
	}
	if cfg.Limits.MaxAvatarBytes <= 0 {
		cfg.Limits.MaxAvatarBytes = chat.DefaultMaxAvatarBytes
	}
	cfg.Limits.MaxAvatarBytes = min(cfg.Limits.MaxAvatarBytes, cfg.Limits.MaxBytes)
	if cfg.Limits.MaxPixels <= 0 {
		cfg.Limits.MaxPixels = chat.DefaultMaxImagePixels
	}
	cfg.URLExpiry = orDefault(cfg.URLExpiry, 15*time.Minute)
	cfg.DownloadExpiry = orDefault(cfg.DownloadExpiry, 5*time.Minute)
	cfg.TTL = orDefault(cfg.TTL, 24*time.Hour)
	cfg.ThumbnailWait = orDefault(cfg.ThumbnailWait, 5*time.Second)
	cfg.CleanupInterval = orDefault(cfg.CleanupInterval, time.Minute)
	cfg.DeleteTimeout = orDefault(cfg.DeleteTimeout, 30*time.Second)
	if cfg.ThumbnailWorkers <= 0 {
		cfg.ThumbnailWorkers = 2
	}
	if cfg.TTL <= cfg.URLExpiry {
		return nil, fmt.Errorf("attach: the upload TTL (%s) must be longer than the upload URL expiry (%s)", cfg.TTL, cfg.URLExpiry)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	var avatarTypes []string
	for _, t := range media.DecodableTypes() {
		if chat.TypeAllowed(cfg.Limits.Types, t) {
			avatarTypes = append(avatarTypes, t)
		}
	}
	budget := int64(cfg.ThumbnailWorkers) * cfg.Limits.MaxPixels * 4
	return &Service{cfg: cfg, log: cfg.Logger, metrics: m, avatarTypes: avatarTypes, ops: map[string]*op{}, puts: map[int64]int{}, thumbs: map[string]chan struct{}{},
		budget: semaphore.NewWeighted(budget), budgetBytes: budget, thumbTimeout: 2 * time.Minute,
		jobs: make(chan thumbJob, 1024), stop: make(chan struct{})}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Start starts the thumbnail workers and the cleanup loop.
func (s *Service) Start() {
	s.start.Do(func() {
		for i := 0; i < s.cfg.ThumbnailWorkers; i++ {
			s.wg.Add(1)
			go s.thumbnailer()
		}
		s.wg.Add(1)
		go s.cleanup()
	})
}

// Close stops the goroutines and waits for them (a thumbnail being made
// is finished, one waiting is left for the next start).
func (s *Service) Close(ctx context.Context) error {
	s.closed.Do(func() { close(s.stop) })
	if err := shutdown.Wait(ctx, &s.wg); err != nil {
		return fmt.Errorf("stop attachments: %w", err)
	}
	return nil
}

// CreateUpload checks a request against the limits and records it; with
// a key, the upload the key made before (a retry) is answered instead
// (see RetriedUpload), even when it raced with this one.
func (s *Service) CreateUpload(ctx context.Context, req chat.UploadRequest) (chat.UploadTicket, error) {
	name, declared, err := s.check(req)
	if err != nil {
		return chat.UploadTicket{}, err
	}
	if req.Purpose == "" {
		req.Purpose = chat.PurposeMessage
	}
	now := time.Now()
	rec := chat.UploadRecord{ID: chat.NewUploadID(), BlobKey: chat.NewBlobKey(), UploaderID: req.UserID,
		Purpose: req.Purpose, ConversationID: req.ConversationID, Name: name, DeclaredType: declared, DeclaredSize: req.Size,
		DurationMs: req.DurationMs, URLExpiresAt: now.Add(s.cfg.URLExpiry).UTC().Truncate(time.Second)}
	// Signed before the row exists: a failure leaves nothing behind.
	t, err := s.ticket(ctx, rec)
	if err != nil {
		return chat.UploadTicket{}, err
	}
	made, created, err := s.cfg.Store.CreateKeyedUpload(ctx, rec, req.Key, s.cfg.QuotaBytesPerDay)
	if err != nil {
		switch chat.ErrorCode(err) {
		case chat.CodeRateLimited:
			s.metrics.uploads.WithLabelValues("quota").Inc()
		case chat.CodeTooLarge: // larger than a whole day's quota
			s.metrics.uploads.WithLabelValues("too_large").Inc()
		}
		return chat.UploadTicket{}, err
	}
	if !created {
		return s.retried(ctx, made, req, name, declared)
	}
	s.metrics.uploads.WithLabelValues("created").Inc()
	return t, nil
}

// RetriedUpload answers the ticket of the upload req.Key made before, if
// any (chat.Attachments), to a user who may still upload into req's
// conversation: refused as a new request is, otherwise.
func (s *Service) RetriedUpload(ctx context.Context, req chat.UploadRequest) (chat.UploadTicket, error) {
	if req.Key == "" {
		return chat.UploadTicket{}, nil
	}
	name, declared, err := s.check(req)
	if err != nil {
		return chat.UploadTicket{}, err
	}
	asked := chat.UploadRecord{UploaderID: req.UserID, Purpose: req.Purpose, ConversationID: req.ConversationID}
	rec, found, err := s.cfg.Store.UploadByKey(ctx, asked, req.Key)
	if err != nil || !found {
		return chat.UploadTicket{}, err
	}
	return s.retried(ctx, rec, req, name, declared)
}

// retried answers a request repeated with its key with the ticket of
// rec, the upload the key made: the same upload id and expiry, and for
// an object store a URL signed again for the same object until that same
// expiry (the first URL is as good, but the retry never saw it), or, the
// upload complete, for an object nothing reads (againKey). The key
// asking for another upload is a conflict; once the URL expired the key
// is spent (gone), whatever became of the upload: checked first, as a
// recall or an avatar's use or release changes the columns compared.
func (s *Service) retried(ctx context.Context, rec chat.UploadRecord, req chat.UploadRequest, name, declared string) (chat.UploadTicket, error) {
	if !time.Now().Before(rec.URLExpiresAt) {
		return chat.UploadTicket{}, chat.Errorf(chat.CodeGone,
			"the URL of upload %s, made with key %s, expired at %s; ask for a new upload with a new key", rec.ID, req.Key, rec.URLExpiresAt.Format(time.RFC3339))
	}
	if !rec.SameUpload(req, name, declared) {
		return chat.UploadTicket{}, chat.Errorf(chat.CodeConflict,
			"key %s asked for upload %s of %d bytes of %s (%s) before; use a new key for another file", req.Key, rec.ID, rec.DeclaredSize, rec.DeclaredType, rec.Purpose)
	}
	if rec.State != chat.UploadPending && s.cfg.Blobs.Direct() {
		// Completed, its key is chatd's checked copy (CompleteUpload),
		// which no URL may write: bytes PUT again go to a key nothing
		// reads, deleted once the URL can no longer write it, and the
		// completion answers the upload as it is. One such key per
		// upload, however often asked: each is leave to store the
		// declared size, which the day's bytes do not charge again.
		rec.BlobKey = againKey(rec.BlobKey)
		if err := s.cfg.Store.QueueBlobDeletion(ctx, rec.BlobKey, "upload URL asked again once complete", rec.URLExpiresAt.Add(s.urlGrace())); err != nil {
			return chat.UploadTicket{}, err
		}
	}
	t, err := s.ticket(ctx, rec)
	if err != nil {
		return chat.UploadTicket{}, err
	}
	s.metrics.uploads.WithLabelValues("retried").Inc()
	t.Retried = true
	return t, nil
}

// againKey is where bytes PUT with the ticket of a complete upload whose
// blob is blobKey, asked again with its key (retried), go: a key of the
// blob store's form (chat.NewBlobKey), the same however often asked,
// that nothing reads.
func againKey(blobKey string) string {
	sum := sha256.Sum256([]byte("asked again once complete: " + blobKey))
	k := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:32]
	return k[:2] + "/" + k[2:]
}

// check checks a request against the limits: its cleaned name and
// declared type.
func (s *Service) check(req chat.UploadRequest) (name, declared string, err error) {
	if name, err = chat.CleanFileName(req.Name); err != nil {
		return "", "", err
	}
	if declared, err = chat.NormalizeMediaType(req.ContentType); err != nil {
		return "", "", err
	}
	purpose := req.Purpose
	if purpose == "" {
		purpose = chat.PurposeMessage
	}
	if req.Size > s.cfg.Limits.MaxBytes {
		s.metrics.uploads.WithLabelValues("too_large").Inc()
		size, limit := chat.SizesText(req.Size, s.cfg.Limits.MaxBytes)
		return "", "", chat.Errorf(chat.CodeTooLarge, "the file is %s, the limit is %s", size, limit)
	}
	if purpose == chat.PurposeAvatar && req.Size > s.cfg.Limits.MaxAvatarBytes {
		s.metrics.uploads.WithLabelValues("too_large").Inc()
		size, limit := chat.SizesText(req.Size, s.cfg.Limits.MaxAvatarBytes)
		return "", "", chat.Errorf(chat.CodeTooLarge, "the picture is %s, an avatar is at most %s: send a smaller one (it is shown small)", size, limit)
	}
	if !chat.TypeAllowed(s.types(purpose), declared) {
		s.metrics.uploads.WithLabelValues("unsupported").Inc()
		if purpose == chat.PurposeAvatar {
			return "", "", chat.Errorf(chat.CodeUnsupported, "an avatar of type %s is not accepted here; these are: %s",
				declared, strings.Join(s.avatarTypes, ", "))
		}
		return "", "", chat.Errorf(chat.CodeUnsupported, "files of type %s are not accepted here", declared)
	}
	return name, declared, nil
}

// ticket is where and how rec's bytes go, until rec.URLExpiresAt.
func (s *Service) ticket(ctx context.Context, rec chat.UploadRecord) (chat.UploadTicket, error) {
	t := chat.UploadTicket{UploadID: rec.ID, Method: "PUT", ExpiresAt: rec.URLExpiresAt,
		Headers: map[string]string{"Content-Type": rec.DeclaredType}}
	if !s.cfg.Blobs.Direct() {
		t.URL = "/v1/uploads/" + rec.ID
		return t, nil
	}
	url, hdr, err := s.cfg.Blobs.PresignPut(ctx, rec.BlobKey, rec.DeclaredType, rec.DeclaredSize, time.Until(rec.URLExpiresAt))
	if err != nil {
		return chat.UploadTicket{}, chat.Unavailable("sign the upload URL", err)
	}
	t.URL, t.Headers, t.CompleteURL = url, hdr, "/v1/uploads/"+rec.ID+"/complete"
	return t, nil
}

// urlGrace is how long after its URL expired the key an upload's URL
// names may still be written, its deletion waiting as long: the object
// store checks the expiry by its own clock, which may lag (clockSkew),
// and stores an object whose PUT began before the expiry once its last
// byte came, as late as the URL was valid. None for chatd's own PUT,
// which checks the expiry itself, and which finding its upload gone
// queues the blob it wrote (finish).
func (s *Service) urlGrace() time.Duration {
	if !s.cfg.Blobs.Direct() {
		return 0
	}
	return s.cfg.URLExpiry + clockSkew
}

// types are the media types an upload for purpose may be.
func (s *Service) types(purpose string) []string {
	if purpose == chat.PurposeAvatar {
		return s.avatarTypes
	}
	return s.cfg.Limits.Types
}

// own reads an upload of userID's (another user's is not_found: upload
// ids are not shown to anyone else before they are sent).
func (s *Service) own(ctx context.Context, userID int64, id string) (chat.UploadRecord, error) {
	rec, err := s.cfg.Store.GetUpload(ctx, id)
	if err != nil {
		return rec, err
	}
	if rec.UploaderID != userID {
		return rec, chat.Errorf(chat.CodeNotFound, "there is no upload %s", id)
	}
	return rec, nil
}

// writable reads upload id as userID's (see own) and refuses it as a new
// ticket for its conversation would be (not_member, blocked; the store's
// rule, UploadAccess): bytes PUT or completed for a conversation its
// uploader may no longer write into could never be sent there.
func (s *Service) writable(ctx context.Context, userID int64, id string) (chat.UploadRecord, error) {
	rec, err := s.own(ctx, userID, id)
	if err != nil {
		return rec, err
	}
	return rec, s.cfg.Store.UploadAccess(ctx, rec)
}

// begin makes this the upload's only PUT or completion: one still running
// is interrupted and waited for. end must be called when done.
func (s *Service) begin(ctx context.Context, id string, interrupt func()) (end func(), err error) {
	me := &op{interrupt: interrupt, done: make(chan struct{})}
	for {
		s.mu.Lock()
		prev := s.ops[id]
		if prev == nil {
			s.ops[id] = me
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.ops, id)
				s.mu.Unlock()
				close(me.done)
			}, nil
		}
		s.mu.Unlock()
		if prev.interrupt != nil {
			prev.interrupt()
		}
		select {
		case <-prev.done:
		case <-ctx.Done():
			return nil, chat.Unavailable("upload", ctx.Err())
		}
	}
}

// claim reads upload id as userID's, still theirs to write (see
// writable), and, while it is pending, begins its only PUT or completion
// (see begin) and reads it again (the one it waited for may have
// completed it). Another user's upload, one its uploader may no longer
// write, or one no longer pending, is answered before begin: such a
// request never interrupts a PUT of the owner's that is running. end must
// be called when done; on an error there is nothing to end.
func (s *Service) claim(ctx context.Context, userID int64, id string, interrupt func()) (rec chat.UploadRecord, end func(), err error) {
	if rec, err = s.writable(ctx, userID, id); err != nil {
		return rec, nil, err
	}
	if rec.State != chat.UploadPending {
		return rec, func() {}, nil
	}
	if end, err = s.begin(ctx, id, interrupt); err != nil {
		return rec, nil, err
	}
	if rec, err = s.own(ctx, userID, id); err != nil {
		end()
		return rec, nil, err
	}
	return rec, end, nil
}

// Interrupter is implemented by request bodies whose blocked Read can be
// cut short (httpapi's: a read deadline), so a PUT sent again does not
// wait for a dead connection of the first.
type Interrupter interface{ Interrupt() }

// counter counts what a body delivered and how it ended.
type counter struct {
	r   io.Reader
	ctx context.Context
	n   int64
	err error
}

func (c *counter) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		c.err = err
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// errURLExpired ends the body of a PUT whose upload's URL expired before
// the body's end arrived.
var errURLExpired = errors.New("the upload's URL expired")

// expiring is a PUT's body that ends at its upload's URL expiry (at): a
// body whose end has not arrived then fails with errURLExpired, its read
// under way interrupted (Interrupter). Without it a PUT sending above
// the idle minimum could hold its upload, a file and a handler for a day
// past the expiry.
type expiring struct {
	r       io.Reader
	timer   *time.Timer
	expired atomic.Bool
	ended   bool // the body's end arrived before at
}

func expire(r io.Reader, at time.Time) *expiring {
	e := &expiring{r: r}
	e.timer = time.AfterFunc(time.Until(at), func() {
		e.expired.Store(true)
		if in, ok := r.(Interrupter); ok {
			in.Interrupt()
		}
	})
	return e
}

func (e *expiring) Read(p []byte) (int, error) {
	if e.ended {
		return e.r.Read(p)
	}
	if e.expired.Load() {
		return 0, errURLExpired
	}
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		if !e.timer.Stop() {
			// The expiry came with the end: its interrupt may be on
			// its way.
			return n, errURLExpired
		}
		e.ended = true
		return n, err
	}
	if err != nil && e.expired.Load() {
		return n, errURLExpired
	}
	return n, err
}

// stop ends the watch of the expiry once the PUT is over.
func (e *expiring) stop() { e.timer.Stop() }

// urlExpired is the answer to a PUT of an upload whose URL expired.
func urlExpired(rec chat.UploadRecord) error {
	if rec.State != chat.UploadPending {
		return chat.Errorf(chat.CodeGone, "the URL of upload %s expired at %s; the upload is %s (GET it)", rec.ID, rec.URLExpiresAt.Format(time.RFC3339), rec.State)
	}
	return chat.Errorf(chat.CodeGone, "the URL of upload %s expired at %s; create a new upload", rec.ID, rec.URLExpiresAt.Format(time.RFC3339))
}

// PutUpload streams an upload's bytes to the blob store: the head held to
// sniff and strip it, the rest straight through, hashed on the way.
func (s *Service) PutUpload(ctx context.Context, userID int64, id string, body io.Reader, length int64) (chat.Upload, error) {
	if s.cfg.Blobs.Direct() {
		return chat.Upload{}, chat.Errorf(chat.CodeInvalid, "uploads on this server go to the object store: PUT to the url of the upload's ticket")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupt := cancel
	if in, ok := body.(Interrupter); ok {
		interrupt = func() { cancel(); in.Interrupt() }
	}
	rec, end, err := s.claim(ctx, userID, id, interrupt)
	if err != nil {
		return chat.Upload{}, err
	}
	defer end()
	// Counted once claimed: a PUT sent again replaces its upload's
	// running one (begin waited for it to end), at the cap too.
	done, err := s.admitPut(userID)
	if err != nil {
		return chat.Upload{}, err
	}
	defer done()
	// Past its URL's expiry no PUT is read, whatever became of the
	// upload: a complete one's retry would otherwise be read whole for
	// as long as the upload lives.
	if time.Now().After(rec.URLExpiresAt) {
		return chat.Upload{}, urlExpired(rec)
	}
	if rec.State != chat.UploadPending {
		return s.putAgain(ctx, rec, body, length)
	}
	switch {
	case length > rec.DeclaredSize:
		s.refused(ctx, rec, "too_large")
		return chat.Upload{}, chat.Errorf(chat.CodeTooLarge, "Content-Length is %d, more than the declared %d bytes; the upload is deleted", length, rec.DeclaredSize)
	case length >= 0 && length < rec.DeclaredSize:
		s.refused(ctx, rec, "size")
		return chat.Upload{}, chat.Errorf(chat.CodeInvalid, "Content-Length is %d, not the declared %d bytes; the upload is deleted", length, rec.DeclaredSize)
	}

	// Its bytes must all arrive before the URL expires, as they must
	// start to.
	exp := expire(body, rec.URLExpiresAt)
	defer exp.stop()
	c := &counter{r: exp, ctx: ctx}
	head, err := readHead(c, min(rec.DeclaredSize, media.HeadLen))
	if err != nil {
		return chat.Upload{}, s.shortPut(ctx, rec, c)
	}
	ctype, err := media.Sniff(head, rec.DeclaredType, s.types(rec.Purpose))
	if err != nil {
		s.refused(ctx, rec, "sniff")
		return chat.Upload{}, refusal(err, id)
	}
	h := sha256.New()
	if err := s.cfg.Blobs.Put(ctx, rec.BlobKey, stripped(head, c, ctype, h), rec.DeclaredSize, ctype); err != nil {
		if !errors.Is(err, chat.ErrBlobSize) {
			if c.err != nil && !errors.Is(c.err, io.EOF) {
				return chat.Upload{}, s.shortPut(ctx, rec, c)
			}
			return chat.Upload{}, chat.Unavailable("store the upload", err)
		}
		if c.n > rec.DeclaredSize {
			s.refused(ctx, rec, "too_large")
			return chat.Upload{}, chat.Errorf(chat.CodeTooLarge, "more bytes than the declared %d; the upload is deleted", rec.DeclaredSize)
		}
		return chat.Upload{}, s.shortPut(ctx, rec, c)
	}
	s.metrics.bytesIn.Add(float64(rec.DeclaredSize))
	return s.finish(ctx, rec, ctype, hex.EncodeToString(h.Sum(nil)))
}

// admitPut counts a PUT of userID's, refused (rate_limited) while
// PutsPerUser of theirs run; done must be called when it ends.
func (s *Service) admitPut(userID int64) (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.puts[userID] >= PutsPerUser {
		s.metrics.uploads.WithLabelValues("busy").Inc()
		return nil, &chat.Error{Code: chat.CodeRateLimited,
			Message:   fmt.Sprintf("%d uploads of yours are being sent to this server already, the most it takes at once; PUT this one again once one of them is done", PutsPerUser),
			RateLimit: &chat.RateLimitInfo{Kind: "upload_puts", Limit: PutsPerUser, RetryAfter: putRetry, Reset: putRetry}}
	}
	s.puts[userID]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.puts[userID]--; s.puts[userID] == 0 {
			delete(s.puts, userID)
		}
	}, nil
}

// readHead reads the first n bytes of r, as io.ReadFull would, into a
// buffer grown as they come: a PUT whose client sends slowly, or
// nothing, holds what it received, not n bytes from its start.
func readHead(r io.Reader, n int64) ([]byte, error) {
	head := make([]byte, 0, min(n, 4<<10))
	for int64(len(head)) < n {
		if len(head) == cap(head) {
			head = append(make([]byte, 0, min(2*int64(cap(head)), n)), head...)
		}
		m, err := r.Read(head[len(head):cap(head)])
		head = head[:len(head)+m]
		switch {
		case int64(len(head)) == n:
			return head, nil
		case errors.Is(err, io.EOF) && len(head) > 0:
			return head, io.ErrUnexpectedEOF
		case err != nil:
			return head, err
		}
	}
	return head, nil
}

// putAgain answers a PUT of an upload that is no longer pending. A
// client whose first PUT's answer was lost (a phone on a weak network)
// sends the same bytes again: they are read, stripped and hashed as the
// first were, compared with what completion recorded (size, type,
// sha256) and stored nowhere, and the answer is the first's, the upload
// as it stands. Other bytes are a conflict: an upload's bytes never
// change. They must arrive by the upload's URL expiry, as the first's
// must: a retry cannot hold a handler for longer.
func (s *Service) putAgain(ctx context.Context, rec chat.UploadRecord, body io.Reader, length int64) (chat.Upload, error) {
	u := s.view(rec)
	if u.Attachment == nil {
		// Recalled or released: its bytes are gone, nothing to match.
		return chat.Upload{}, chat.Errorf(chat.CodeConflict, "upload %s is %s already; its bytes cannot change", rec.ID, rec.State)
	}
	other := func(how string) error {
		s.metrics.uploads.WithLabelValues("again_other").Inc()
		return chat.Errorf(chat.CodeConflict, "upload %s is %s already with other bytes (%s); its bytes cannot change: create a new upload for another file",
			rec.ID, rec.State, how)
	}
	if length >= 0 && length != rec.Size {
		return chat.Upload{}, other(fmt.Sprintf("Content-Length is %d, the upload has %d bytes", length, rec.Size))
	}
	exp := expire(body, rec.URLExpiresAt)
	defer exp.stop()
	c := &counter{r: exp, ctx: ctx}
	cut := func() error {
		// Nothing to keep or drop: the upload is complete whatever this
		// PUT delivers.
		if errors.Is(c.err, errURLExpired) {
			s.metrics.uploads.WithLabelValues("expired").Inc()
			return urlExpired(rec)
		}
		return chat.Errorf(chat.CodeInvalid, "the upload was sent again and cut short after %d of %d bytes; it is %s already", c.n, rec.Size, rec.State)
	}
	head, err := readHead(c, min(rec.Size, media.HeadLen))
	if err != nil {
		if c.err != nil && !errors.Is(c.err, io.EOF) {
			return chat.Upload{}, cut()
		}
		return chat.Upload{}, other(fmt.Sprintf("%d bytes, not %d", c.n, rec.Size))
	}
	ctype, err := media.Sniff(head, rec.DeclaredType, s.types(rec.Purpose))
	if err != nil || ctype != rec.ContentType {
		return chat.Upload{}, other("another type")
	}
	h := sha256.New()
	n, err := io.Copy(io.Discard, io.LimitReader(stripped(head, c, ctype, h), rec.Size+1))
	switch {
	case c.err != nil && !errors.Is(c.err, io.EOF):
		return chat.Upload{}, cut()
	case err != nil:
		return chat.Upload{}, other("they cannot be read as the first were")
	case n != rec.Size:
		return chat.Upload{}, other(fmt.Sprintf("not %d bytes", rec.Size))
	case hexSum(h) != rec.SHA256:
		return chat.Upload{}, other("another sha256")
	}
	s.metrics.uploads.WithLabelValues("again").Inc()
	return u, nil
}

// stripped is what chatd stores of an upload whose first bytes are head
// and the rest rest: location data removed, hashed into h on the way.
func stripped(head []byte, rest io.Reader, ctype string, h hash.Hash) io.Reader {
	return io.TeeReader(media.Strip(io.MultiReader(bytes.NewReader(head), rest), ctype), h)
}

// shortPut answers a PUT that ended before the declared size: a body
// that ended cleanly said the file is smaller than declared (refused); a
// connection that broke leaves the upload pending, to be PUT again.
func (s *Service) shortPut(ctx context.Context, rec chat.UploadRecord, c *counter) error {
	if errors.Is(c.err, errURLExpired) {
		s.metrics.uploads.WithLabelValues("expired").Inc()
		return urlExpired(rec)
	}
	if errors.Is(c.err, io.EOF) && c.n < rec.DeclaredSize {
		s.refused(ctx, rec, "size")
		return chat.Errorf(chat.CodeInvalid, "the body held %d bytes, not the declared %d; the upload is deleted", c.n, rec.DeclaredSize)
	}
	s.metrics.uploads.WithLabelValues("cut").Inc()
	return chat.Errorf(chat.CodeInvalid, "the upload was cut short after %d of %d bytes; PUT it again (the upload stays open until %s)",
		c.n, rec.DeclaredSize, rec.URLExpiresAt.Format(time.RFC3339))
}

// refusal turns a media verdict into the client's error.
func refusal(err error, id string) error {
	switch {
	case errors.Is(err, media.ErrBomb):
		return chat.Errorf(chat.CodeTooLarge, "upload %s refused: %v", id, err)
	case errors.Is(err, media.ErrMismatch):
		return chat.Errorf(chat.CodeUnsupported, "upload %s refused: %v", id, err)
	}
	var ce *chat.Error
	if errors.As(err, &ce) {
		return chat.Errorf(ce.Code, "upload %s refused: %s", id, ce.Message)
	}
	return chat.Errorf(chat.CodeUnsupported, "upload %s refused: the file cannot be read (%v)", id, err)
}

// refused deletes an upload whose bytes are not what it declared; its
// blob (if any was written) is queued, not before its URL expired and
// its grace passed (urlGrace).
func (s *Service) refused(ctx context.Context, rec chat.UploadRecord, why string) {
	s.metrics.uploads.WithLabelValues("refused_" + why).Inc()
	if err := s.cfg.Store.DropUpload(context.WithoutCancel(ctx), rec.ID, rec.URLExpiresAt.Add(s.urlGrace())); err != nil {
		// The expiry drops it later; nothing is lost.
		s.log.Warn("drop a refused upload", "upload", rec.ID, "err", err)
	}
}

// finish measures stored bytes, records the upload complete and waits a
// little for its thumbnail.
func (s *Service) finish(ctx context.Context, rec chat.UploadRecord, ctype, sum string) (chat.Upload, error) {
	meta := chat.UploadMeta{BlobKey: rec.BlobKey, KeyDeletableAt: rec.URLExpiresAt.Add(s.urlGrace()), ContentType: ctype, Size: rec.DeclaredSize, SHA256: sum}
	if err := s.measure(ctx, rec, &meta); err != nil {
		if chat.ErrorCode(err) == chat.CodeUnavailable {
			// The store failed, not the file: pending still, the
			// client's retry measures it again.
			return chat.Upload{}, err
		}
		s.refused(ctx, rec, "image")
		return chat.Upload{}, refusal(err, rec.ID)
	}
	ok, err := s.cfg.Store.CompleteUpload(ctx, rec.ID, meta)
	if err != nil {
		// Pending still: the blob is written again by the next PUT, or
		// deleted with the upload when it expires.
		return chat.Upload{}, err
	}
	if !ok {
		// Not pending any more: another completion of it won (the same
		// POST sent again to another node), or the upload went
		// (expired). Unless the winner recorded the same key, nothing
		// references the blob just written.
		cur, err := s.cfg.Store.GetUpload(context.WithoutCancel(ctx), rec.ID)
		if err != nil || cur.BlobKey != rec.BlobKey {
			if err := s.cfg.Store.QueueBlobDeletion(context.WithoutCancel(ctx), rec.BlobKey, "orphaned by a late upload", rec.URLExpiresAt); err != nil {
				s.log.Warn("queue an orphaned blob", "upload", rec.ID, "err", err)
			}
		}
		if err == nil && cur.State != chat.UploadPending {
			return s.view(cur), nil // completing twice is answered the same
		}
		return chat.Upload{}, chat.Errorf(chat.CodeGone, "upload %s expired while its bytes arrived; create a new upload", rec.ID)
	}
	s.metrics.uploads.WithLabelValues("complete").Inc()
	if meta.Thumbnail {
		rec.ContentType, rec.State = ctype, chat.UploadComplete
		if done, ok := s.enqueue(rec); ok {
			t := time.NewTimer(s.cfg.ThumbnailWait)
			select {
			case <-done:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	return s.GetUpload(context.WithoutCancel(ctx), rec.UploaderID, rec.ID)
}

// measure reads an image's size from the stored header (refusing a bomb),
// a HEIF image's from its container (never decoded: no bomb, and a file
// that does not say has no size but is not refused), and an audio or
// video file's duration.
func (s *Service) measure(ctx context.Context, rec chat.UploadRecord, meta *chat.UploadMeta) error {
	image := media.Decodable(meta.ContentType)
	heif := media.IsHEIF(meta.ContentType)
	av := chat.MsgTypeOf(meta.ContentType) == chat.MsgAudio || chat.MsgTypeOf(meta.ContentType) == chat.MsgVideo
	if !image && !heif && !av {
		return nil
	}
	opened, err := s.cfg.Blobs.Open(ctx, rec.BlobKey)
	if err != nil {
		return chat.Unavailable("read the upload", err)
	}
	defer opened.Close()
	r := &storeReader{BlobReader: opened}
	switch {
	case av:
		meta.DurationMs = media.Duration(r, rec.DeclaredSize, meta.ContentType)
		return r.failed()
	case heif:
		if size, ok := media.HEIFSize(r, rec.DeclaredSize); ok {
			meta.Width, meta.Height = size.Width, size.Height
		}
		return r.failed()
	}
	head := make([]byte, min(rec.DeclaredSize, media.HeadLen))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return chat.Unavailable("read the upload", err)
	}
	orientation := media.Orientation(r, rec.DeclaredSize, meta.ContentType, head)
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return chat.Unavailable("read the upload", err)
	}
	size, err := media.Config(r, meta.ContentType, s.cfg.Limits.MaxPixels, orientation)
	if err := r.failed(); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	meta.Width, meta.Height, meta.Thumbnail = size.Width, size.Height, true
	return nil
}

// storeReader is a blob read for a verdict on its bytes: it keeps the
// store's failures apart from what the bytes are, which the parsers
// reading through it cannot (to them a read that failed is a file that
// ends early), so a read the store cut short is retried, never taken for
// a file that cannot be read.
type storeReader struct {
	chat.BlobReader
	err error // the first failure of the store
}

func (r *storeReader) Read(p []byte) (int, error) {
	n, err := r.BlobReader.Read(p)
	r.note(err)
	return n, err
}

func (r *storeReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.BlobReader.ReadAt(p, off)
	if off >= 0 {
		// A negative offset is the parser's (a malformed file), not
		// the store's failure.
		r.note(err)
	}
	return n, err
}

func (r *storeReader) note(err error) {
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
}

// failed is the store's failure as the client's error (unavailable),
// nil when every read the store answered succeeded.
func (r *storeReader) failed() error {
	if r.err == nil {
		return nil
	}
	return chat.Unavailable("read the upload", r.err)
}

// CompleteUpload checks the bytes a client PUT to the object store: their
// size, their sniffed type; they are read once, location data stripped
// and hashed on the way to a key of chatd's own. The upload URL stays
// valid until it expires and nothing can revoke it, so whatever is PUT
// to it after this read is never served: the upload's key is deleted,
// and deleted again once its URL expired.
func (s *Service) CompleteUpload(ctx context.Context, userID int64, id string) (chat.Upload, error) {
	if !s.cfg.Blobs.Direct() {
		// The PUT completes it; this only reads, so it does not claim
		// the upload: a PUT of it running is not interrupted.
		rec, err := s.writable(ctx, userID, id)
		if err != nil {
			return chat.Upload{}, err
		}
		u := s.view(rec)
		if u.State == chat.UploadPending {
			return chat.Upload{}, chat.Errorf(chat.CodeInvalid, "upload %s has no bytes yet: PUT them to /v1/uploads/%s, which completes it", id, id)
		}
		return u, nil // completing twice is answered the same
	}
	rec, end, err := s.claim(ctx, userID, id, nil)
	if err != nil {
		return chat.Upload{}, err
	}
	defer end()
	if rec.State != chat.UploadPending {
		return s.view(rec), nil // completing twice is answered the same
	}
	info, err := s.cfg.Blobs.Stat(ctx, rec.BlobKey)
	if errors.Is(err, chat.ErrBlobNotFound) {
		if u, ok := s.completedElsewhere(ctx, id); ok {
			return u, nil
		}
		return chat.Upload{}, chat.Errorf(chat.CodeInvalid, "upload %s has no bytes yet: PUT them to the ticket's url first", id)
	}
	if err != nil {
		return chat.Upload{}, chat.Unavailable("read the upload", err)
	}
	if info.Size != rec.DeclaredSize {
		s.refused(ctx, rec, "size")
		return chat.Upload{}, chat.Errorf(chat.CodeInvalid, "upload %s is %d bytes, not the declared %d; the upload is deleted", id, info.Size, rec.DeclaredSize)
	}
	r, err := s.cfg.Blobs.Open(ctx, rec.BlobKey)
	if err != nil {
		if u, ok := s.completedElsewhere(ctx, id); ok {
			return u, nil
		}
		return chat.Upload{}, chat.Unavailable("read the upload", err)
	}
	defer r.Close()
	head := make([]byte, min(rec.DeclaredSize, media.HeadLen))
	if _, err := io.ReadFull(r, head); err != nil {
		if u, ok := s.completedElsewhere(ctx, id); ok {
			return u, nil
		}
		return chat.Upload{}, chat.Unavailable("read the upload", err)
	}
	ctype, err := media.Sniff(head, rec.DeclaredType, s.types(rec.Purpose))
	if err != nil {
		s.refused(ctx, rec, "sniff")
		return chat.Upload{}, refusal(err, id)
	}
	h := sha256.New()
	uploaded := rec.BlobKey
	rec.BlobKey = chat.NewBlobKey()
	// The copy is queued for deletion before it is written, due after the
	// TTL: a crash (or the database lost) between writing it and
	// recording the upload complete leaves a queue row, never an object
	// nothing names. Recording it takes the row back.
	if err := s.cfg.Store.QueueBlobDeletion(ctx, rec.BlobKey, "copy of an upload", time.Now().Add(s.cfg.TTL)); err != nil {
		return chat.Upload{}, err
	}
	if err := s.cfg.Blobs.Put(ctx, rec.BlobKey, stripped(head, r, ctype, h), rec.DeclaredSize, ctype); err != nil {
		if u, ok := s.completedElsewhere(ctx, id); ok {
			return u, nil // the copy stays queued for deletion
		}
		return chat.Upload{}, chat.Unavailable("copy the upload", err)
	}
	u, err := s.finish(ctx, rec, ctype, hexSum(h))
	if err != nil {
		// The copy is not recorded: its queued deletion stays (or, if
		// the record committed after all, a live attachment names it
		// and the queue keeps it). A refusal is sure of it and deletes
		// the copy now.
		switch chat.ErrorCode(err) {
		case chat.CodeUnavailable, chat.CodeInternal:
		default:
			s.deleteNow(ctx, rec.BlobKey, "delete the copy of a refused upload", id)
		}
		return chat.Upload{}, err
	}
	// Queued already for when its URL expires; gone now.
	s.deleteNow(ctx, uploaded, "delete a completed upload's object", id)
	return u, nil
}

// completedElsewhere is upload id as another completion of it left it,
// when one did: the same POST sent again (its answer lost) may reach
// another node while this one runs, and the winner copies the bytes to a
// key of its own and deletes the object this one found pending, so this
// one finds nothing under the URL, or the object gone mid-read. Such a
// completion is answered as a repeated one is, with the upload completed,
// not as one sent before any bytes (which made clients take a new ticket,
// the file stored and charged twice).
func (s *Service) completedElsewhere(ctx context.Context, id string) (chat.Upload, bool) {
	cur, err := s.cfg.Store.GetUpload(context.WithoutCancel(ctx), id)
	if err != nil || cur.State == chat.UploadPending {
		return chat.Upload{}, false
	}
	return s.view(cur), true
}

// deleteNow deletes a blob whose deletion is queued besides, sooner than
// the queue would: even when the client went (the request's context
// ended), and never waiting longer than DeleteTimeout for the store.
func (s *Service) deleteNow(ctx context.Context, key, what, upload string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DeleteTimeout)
	defer cancel()
	if err := s.cfg.Blobs.Delete(ctx, key); err != nil {
		s.log.Info(what, "upload", upload, "err", err)
	}
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// GetUpload reports where an upload of the caller's stands.
func (s *Service) GetUpload(ctx context.Context, userID int64, id string) (chat.Upload, error) {
	rec, err := s.own(ctx, userID, id)
	if err != nil {
		return chat.Upload{}, err
	}
	return s.view(rec), nil
}

func (s *Service) view(rec chat.UploadRecord) chat.Upload {
	u := chat.Upload{UploadID: rec.ID, Purpose: rec.Purpose, ConversationID: rec.ConversationID, State: rec.State,
		ExpiresAt: rec.URLExpiresAt, Seq: rec.Seq}
	if rec.State == chat.UploadComplete || rec.State == chat.UploadAttached || rec.State == chat.UploadAvatar {
		a := rec.Attachment()
		u.Attachment = &a
	}
	return u
}

// OpenAttachment hands a member an attachment or its thumbnail: a
// presigned URL of the object store, or the bytes from local disk.
func (s *Service) OpenAttachment(ctx context.Context, userID int64, id string, thumbnail bool) (chat.Download, error) {
	rec, err := s.cfg.Store.Attachment(ctx, id, userID)
	if err != nil {
		return chat.Download{}, err
	}
	if rec.State == chat.UploadPending {
		return chat.Download{}, chat.Errorf(chat.CodeNotFound, "upload %s has no bytes yet", id)
	}
	d := chat.Download{Attachment: rec.Attachment(), Thumbnail: thumbnail, ContentType: rec.ContentType, Size: rec.Size,
		ETag: `"` + rec.SHA256 + `"`}
	if rec.CompletedAt != nil {
		d.ModTime = *rec.CompletedAt
	}
	key, inline := rec.BlobKey, media.Decodable(rec.ContentType)
	name := rec.Name
	if thumbnail {
		if rec.ThumbState != "ready" || rec.Thumbnail == nil {
			return chat.Download{}, chat.Errorf(chat.CodeNotFound, "attachment %s has no thumbnail", id)
		}
		key, inline = chat.ThumbnailKey(rec.BlobKey), true
		d.ContentType, d.Size, d.ETag = "image/jpeg", rec.Thumbnail.Size, `"`+rec.SHA256+`-thumb"`
		name = "thumbnail.jpg"
	}
	d.Disposition = chat.ContentDisposition(name, inline)
	kind := map[bool]string{false: "original", true: "thumbnail"}[thumbnail]
	if s.cfg.Blobs.Direct() {
		url, err := s.cfg.Blobs.PresignGet(ctx, key, s.cfg.DownloadExpiry, d.ContentType, d.Disposition)
		if err != nil {
			return chat.Download{}, chat.Unavailable("sign the download URL", err)
		}
		d.Redirect = url
		s.metrics.downloads.WithLabelValues(kind, "redirect").Inc()
		return d, nil
	}
	r, err := s.cfg.Blobs.Open(ctx, key)
	if errors.Is(err, chat.ErrBlobNotFound) {
		// Deleted under a queued deletion that raced this read.
		return chat.Download{}, chat.Errorf(chat.CodeGone, "attachment %s is gone", id)
	}
	if err != nil {
		return chat.Download{}, chat.Unavailable("read the attachment", err)
	}
	d.Content = r
	s.metrics.downloads.WithLabelValues(kind, "served").Inc()
	return d, nil
}
