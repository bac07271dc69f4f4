package chat

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Attachments: photos, voice notes, videos and files carried by messages.
//
// A file travels in three steps. The client asks for an upload
// (CreateUpload: conversation, name, declared type and size) and gets a
// ticket: an upload id and a URL to PUT the bytes to, chatd's own for the
// local disk store, a presigned one of the object store otherwise. Once
// the bytes are there the upload is complete: chatd has checked their
// size, sniffed their type, measured an image and stripped its location
// data. Then a send names the upload ids ("attachments") and the send's
// own transaction checks each one before the message commits. Members
// fetch an attachment by id (OpenAttachment).

// Message types: what a message mostly is, by its first attachment.
const (
	MsgText  = "text"
	MsgImage = "image"
	MsgAudio = "audio"
	MsgVideo = "video"
	MsgFile  = "file"
)

// MsgTypeOf is the message type an attachment of contentType gives its
// message.
func MsgTypeOf(contentType string) string {
	switch strings.SplitN(contentType, "/", 2)[0] {
	case "image":
		return MsgImage
	case "audio":
		return MsgAudio
	case "video":
		return MsgVideo
	}
	return MsgFile
}

// Attachment is a file carried by a message, as members see it. ID is the
// upload's id; ContentType is the type chatd sniffed from the bytes (the
// client's word only where the bytes have no signature, as for plain
// text); SHA256 is of the bytes as stored (hex). Width and Height are an
// image's, DurationMs an audio or video file's when chatd could read it
// (or the uploader declared it). Thumbnail is set once chatd made one
// (images only).
type Attachment struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	ContentType string     `json:"contentType"`
	Size        int64      `json:"size"`
	SHA256      string     `json:"sha256"`
	Width       int        `json:"width,omitempty"`
	Height      int        `json:"height,omitempty"`
	DurationMs  int64      `json:"durationMs,omitempty"`
	Caption     string     `json:"caption,omitempty"`
	Thumbnail   *Thumbnail `json:"thumbnail,omitempty"`
}

// Thumbnail is a JPEG of at most ThumbnailMaxSide pixels on its long side,
// without any metadata, at GET /v1/attachments/{id}/thumbnail.
type Thumbnail struct {
	ContentType string `json:"contentType"`
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	Size        int64  `json:"size"`
}

// ThumbnailMaxSide bounds a thumbnail's long side in pixels.
const ThumbnailMaxSide = 320

// AttachmentRef is one attachment of a send: a complete upload of the
// sender's, made for the conversation, and an optional caption.
type AttachmentRef struct {
	UploadID string `json:"uploadId"`
	Caption  string `json:"caption,omitempty"`
}

// Ref is the attachment as a send names it: forwarding a file is sending
// the same upload again, with its caption.
func (a Attachment) Ref() AttachmentRef { return AttachmentRef{UploadID: a.ID, Caption: a.Caption} }

// Attachment limits of a message.
const (
	MaxAttachments    = 10
	MaxCaptionBytes   = 1024
	MaxFileNameBytes  = 255
	uploadIDLength    = 26
	uploadIDAlphabet  = "abcdefghijklmnopqrstuvwxyz234567"
	MaxDeclaredTypeSz = 255
)

var idEncoding = base32.NewEncoding(uploadIDAlphabet).WithPadding(base32.NoPadding)

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on Linux
	}
	return idEncoding.EncodeToString(b)
}

// NewUploadID returns a new upload (and attachment) id: 128 random bits
// in 26 characters of lower-case base32.
func NewUploadID() string { return randomString(16) }

// NewBlobKey returns a new blob key: 160 random bits, neither sequential
// nor derived from the id or the content, split "xy/rest" so a local
// directory holds at most 1024 subdirectories.
func NewBlobKey() string {
	s := randomString(20)
	return s[:2] + "/" + s[2:]
}

// ContentDisposition is the header a file is served with: inline (images,
// shown in the page) or attachment (everything else: saved, never
// rendered by the browser), with the name in RFC 6266 form.
func ContentDisposition(name string, inline bool) string {
	kind := "attachment"
	if inline {
		kind = "inline"
	}
	if v := mime.FormatMediaType(kind, map[string]string{"filename": name}); v != "" {
		return v
	}
	return kind
}

// ValidateUploadID accepts the ids chatd hands out: 26 characters of
// lower-case base32 (128 random bits).
func ValidateUploadID(what, id string) error {
	if len(id) != uploadIDLength || strings.Trim(id, uploadIDAlphabet) != "" {
		return Errorf(CodeInvalid, "%s %q is not an upload id (26 characters a-z, 2-7)", what, truncate(id, 40))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ValidateAttachments checks a message's attachments: 1 to MaxAttachments,
// each a well-formed upload id named once, each caption valid UTF-8 of at
// most MaxCaptionBytes without NUL.
func ValidateAttachments(refs []AttachmentRef) error {
	if len(refs) > MaxAttachments {
		return Errorf(CodeInvalid, "a message carries at most %d attachments, not %d", MaxAttachments, len(refs))
	}
	seen := make(map[string]bool, len(refs))
	for i, r := range refs {
		if err := ValidateUploadID("attachments["+strconv.Itoa(i)+"].uploadId", r.UploadID); err != nil {
			return err
		}
		if seen[r.UploadID] {
			return Errorf(CodeInvalid, "upload %s is attached twice; attach each upload once", r.UploadID)
		}
		seen[r.UploadID] = true
		if len(r.Caption) > MaxCaptionBytes {
			return Errorf(CodeTooLarge, "caption of attachment %d is %d bytes, the limit is %d", i, len(r.Caption), MaxCaptionBytes)
		}
		if !utf8.ValidString(r.Caption) || strings.ContainsRune(r.Caption, 0) {
			return Errorf(CodeInvalid, "caption of attachment %d is not valid UTF-8 without NUL", i)
		}
	}
	return nil
}

// CleanFileName returns the name a file is shown and downloaded under:
// the last element of what the client sent (no directories), without
// control characters, nor the line separators and bidirectional controls
// that would make it read as another name ("photo\u202egpj.exe" as
// "photoexe.jpg": rearrangesLine), at most MaxFileNameBytes. An empty
// result is invalid.
func CleanFileName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", Errorf(CodeInvalid, "name is not valid UTF-8")
	}
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base("/" + name)
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '"' || rearrangesLine(r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" || name == "/" || name == "." || name == ".." {
		return "", Errorf(CodeInvalid, "name must name a file, e.g. photo.jpg")
	}
	return cutFileName(name), nil
}

// cutFileName cuts a name of valid UTF-8 without '/' to MaxFileNameBytes,
// whole runes from the end of what precedes its extension, which it
// keeps: the extension tells people (and their apps) the type. One of
// more than 16 bytes is none: it is cut from its end until the name fits
// or what is left of it is that short. One pass, whatever the name's
// length (the request's body bounds it, not this).
func cutFileName(name string) string {
	if len(name) <= MaxFileNameBytes {
		return name
	}
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		dot = len(name)
	}
	end := len(name)
	for end > MaxFileNameBytes && end-dot > 16 {
		_, n := utf8.DecodeLastRuneInString(name[:end])
		end -= n
	}
	base, ext := name[:dot], name[dot:end]
	for len(base)+len(ext) > MaxFileNameBytes {
		_, n := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-n]
	}
	return base + ext
}

// UploadLimits are what an upload may be.
type UploadLimits struct {
	MaxBytes int64 // declared size at most (413 too_large)
	// MaxAvatarBytes bounds an avatar upload's declared size, within
	// MaxBytes (413 too_large): a picture shown small to everyone who
	// sees the profile or the group.
	MaxAvatarBytes int64
	// Types are the allowed media types, "type/subtype" or "type/*"
	// (415 unsupported).
	Types []string
	// MaxPixels bounds an image's width × height: a decompression bomb
	// (a tiny file declaring 50,000 × 50,000 px) is refused, not decoded.
	MaxPixels int64
}

// DefaultMaxUploadBytes is 25 MiB.
const DefaultMaxUploadBytes = 25 << 20

// DefaultMaxAvatarBytes is 10 MiB: a phone's photo at its usual 12
// megapixels, sent as taken.
const DefaultMaxAvatarBytes = 10 << 20

// DefaultMaxImagePixels is 50 megapixels: the largest phone photos.
const DefaultMaxImagePixels = 50_000_000

// DefaultUploadTypes: images chatd can measure and thumbnail, the HEIF
// photos phones take (HEIC, AVIF: location stripped, not thumbnailed),
// audio, video, PDF, plain text, and common office and archive files.
// SVG and HTML are not among them: a browser runs their scripts.
var DefaultUploadTypes = []string{
	"image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif", "image/avif",
	"audio/*", "video/*",
	"application/pdf", "text/plain", "text/csv", "text/markdown",
	"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation",
	"application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
	"application/vnd.oasis.opendocument.presentation", "application/rtf",
	"application/zip", "application/gzip", "application/x-7z-compressed", "application/x-tar",
	"application/vnd.rar",
}

// TypeAllowed reports whether media type t (no parameters) is in types.
func TypeAllowed(types []string, t string) bool {
	major, _, _ := strings.Cut(t, "/")
	for _, a := range types {
		if a == t || (strings.HasSuffix(a, "/*") && strings.TrimSuffix(a, "/*") == major) {
			return true
		}
	}
	return false
}

// NormalizeMediaType parses a client's content type and returns it
// without parameters, in lower case.
func NormalizeMediaType(ct string) (string, error) {
	if len(ct) > MaxDeclaredTypeSz {
		return "", Errorf(CodeInvalid, "contentType is longer than %d bytes", MaxDeclaredTypeSz)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return "", Errorf(CodeInvalid, "contentType %q is not a media type like image/jpeg", truncate(ct, 40))
	}
	return mt, nil
}

// MaxDurationMs bounds an attachment's durationMs, declared by its
// uploader or read from the file: 2^53-1 ms, the largest integer every
// JSON reader keeps exactly (those using doubles, JavaScript's, too).
const MaxDurationMs = 1<<53 - 1

// Upload purposes: what an upload is for.
const (
	// PurposeMessage: a file for a message of ConversationID.
	PurposeMessage = "message"
	// PurposeAvatar: a picture for the uploader's or a group's avatar
	// (PUT /v1/me, PATCH /v1/conversations/{id} avatarUploadId); it has
	// no conversation, and only images chatd decodes and thumbnails are
	// accepted (JPEG, PNG, GIF, WebP: internal/media.Decodable), of at
	// most UploadLimits.MaxAvatarBytes.
	PurposeAvatar = "avatar"
)

// UploadRequest asks for an upload of one file into a conversation, or
// for an avatar (Purpose avatar, no conversation). DurationMs is what the
// uploader knows of an audio or video file's length (a recorder does);
// chatd keeps it where it cannot read its own.
type UploadRequest struct {
	Purpose        string // "" is PurposeMessage
	ConversationID int64
	UserID         int64
	Name           string
	ContentType    string
	Size           int64
	DurationMs     int64
	// Key, optional, is the uploader's idempotency key (a UUID, the
	// Idempotency-Key header, RPC clientMsgId): a request repeated with it
	// answers the upload it made before (UploadTicket.Retried) instead of
	// making and charging another.
	Key string
}

// UploadTicket is where and how to send an upload's bytes: Method (PUT)
// URL with Headers, before ExpiresAt. CompleteURL, when set, is to be
// POSTed after the bytes were sent (object stores: chatd does not see the
// bytes arrive); chatd's own URL completes the upload by itself.
type UploadTicket struct {
	UploadID    string            `json:"uploadId"`
	URL         string            `json:"url"`
	Method      string            `json:"method"`
	Headers     map[string]string `json:"headers"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	CompleteURL string            `json:"completeUrl,omitempty"`
	// Retried: the ticket of the upload a request with the same key made
	// before; nothing was created or charged this time.
	Retried bool `json:"-"`
}

// SameUpload reports whether an upload recorded as r is the one req asks
// for, with req's name and type cleaned as r's were: what a key repeated
// by a retry must ask for again (the bytes' declared size and type, the
// purpose, conversation and name).
func (r UploadRecord) SameUpload(req UploadRequest, name, declaredType string) bool {
	purpose := req.Purpose
	if purpose == "" {
		purpose = PurposeMessage
	}
	return r.Purpose == purpose && r.ConversationID == req.ConversationID && r.DeclaredSize == req.Size &&
		r.DeclaredType == declaredType && r.Name == name
}

// UploadState is where an upload stands.
type UploadState string

const (
	UploadPending  UploadState = "pending"  // waiting for its bytes
	UploadComplete UploadState = "complete" // checked, ready to attach
	UploadAttached UploadState = "attached" // carried by a message
	UploadRecalled UploadState = "recalled" // its message was recalled; the bytes are gone
	UploadAvatar   UploadState = "avatar"   // in use as the uploader's or a group's avatar
	UploadReleased UploadState = "released" // an avatar replaced or cleared; the bytes are gone
)

// Upload is an upload as its uploader sees it; Attachment is what a
// message attaching it will carry, or the avatar's file (complete,
// attached, avatar).
type Upload struct {
	UploadID       string      `json:"uploadId"`
	Purpose        string      `json:"purpose"`
	ConversationID int64       `json:"conversationId,omitempty"` // a message upload's, a group avatar's
	State          UploadState `json:"state"`
	ExpiresAt      time.Time   `json:"expiresAt"`
	Seq            int64       `json:"seq,omitempty"` // attached: the message
	Attachment     *Attachment `json:"attachment,omitempty"`
}

// Download is an attachment (or its thumbnail) to hand to a member:
// Redirect, a short-lived URL of the object store, or Content, the bytes.
type Download struct {
	Attachment  Attachment
	Thumbnail   bool
	ContentType string
	Disposition string // Content-Disposition
	Size        int64
	ETag        string // quoted
	ModTime     time.Time
	Redirect    string
	Content     BlobReader
}

// Attachments is what transports ask of the attachment subsystem
// (internal/attach): uploads, their bytes and downloads. The Service
// wraps it with the rate limits; every method checks who asks.
type Attachments interface {
	// CreateUpload records an upload and answers its ticket; with
	// req.Key, the ticket of the upload the key made before when there is
	// one (Retried; see RetriedUpload).
	CreateUpload(ctx context.Context, req UploadRequest) (UploadTicket, error)
	// RetriedUpload answers the ticket of the upload req.Key made before
	// (Retried), or a zero ticket when it made none (or its upload is
	// gone). A user who may no longer upload into req's conversation is
	// refused as by CreateUpload (not_member, blocked), first. The key
	// asking for another upload is conflict; the upload's URL expired is
	// gone (a new key asks for a new upload).
	RetriedUpload(ctx context.Context, req UploadRequest) (UploadTicket, error)
	// PutUpload takes the bytes of an upload sent to chatd's own URL:
	// exactly the declared size, streamed to the blob store. A PUT
	// cut short leaves the upload pending, to be sent again; bytes that
	// are not what was declared refuse and delete it.
	PutUpload(ctx context.Context, userID int64, uploadID string, body io.Reader, length int64) (Upload, error)
	// CompleteUpload checks bytes the client sent to the object store.
	CompleteUpload(ctx context.Context, userID int64, uploadID string) (Upload, error)
	GetUpload(ctx context.Context, userID int64, uploadID string) (Upload, error)
	// OpenAttachment hands a member an attachment or its thumbnail:
	// not_found when unknown (or another user's upload not yet sent, or
	// a file of a message at or before the caller's history floor, or an
	// avatar the caller may not see: a user's is seen by whoever sees
	// their profile, a group's by its current members), not_member when
	// the caller is not in its conversation, gone when its message was
	// recalled or the avatar released.
	OpenAttachment(ctx context.Context, userID int64, id string, thumbnail bool) (Download, error)
}

// BlobReader reads a stored blob: sequentially, at offsets, seeking (a
// Range request), then closed.
type BlobReader interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
}

// BlobInfo describes a stored blob.
type BlobInfo struct {
	Size    int64
	ModTime time.Time
}

// Blob store errors.
var (
	ErrBlobNotFound = errors.New("blob not found")
	// ErrBlobSize: Put's reader held fewer or more bytes than declared;
	// nothing was stored.
	ErrBlobSize = errors.New("blob is not the declared size")
	// ErrNoDirectAccess: the store has no URLs of its own (local disk:
	// chatd serves the bytes).
	ErrNoDirectAccess = errors.New("blob store has no direct access URLs")
)

// BlobStore keeps attachment bytes under keys chatd picks (random,
// unguessable); PostgreSQL keeps what they are. internal/blob implements
// it on local disk and on S3-compatible object storage. Every method is
// safe for concurrent use.
type BlobStore interface {
	// Put stores exactly size bytes of r under key, all or nothing: a
	// reader with fewer or more bytes fails with ErrBlobSize and stores
	// nothing; a key written again is replaced whole.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Open reads a blob (ErrBlobNotFound).
	Open(ctx context.Context, key string) (BlobReader, error)
	// Stat describes a blob (ErrBlobNotFound).
	Stat(ctx context.Context, key string) (BlobInfo, error)
	// Delete removes a blob; a missing one is not an error (deleting is
	// idempotent, so a deletion interrupted by a crash is simply run
	// again).
	Delete(ctx context.Context, key string) error
	// List calls fn with every key (operators' checks and tests).
	List(ctx context.Context, fn func(key string) error) error
	// AbortIncomplete removes what unfinished writes of chatd's keys
	// begun before before left in the store, at most limit of them, and
	// says how many: an object store's multipart uploads that a crash
	// (or a failed abort) left, whose parts are stored and billed but
	// named by no object and listed by no List. Local disk has none while
	// it runs (a crash's temporary files go at the next start).
	AbortIncomplete(ctx context.Context, before time.Time, limit int) (int, error)
	// Direct reports whether clients upload and download with presigned
	// URLs (PresignPut, PresignGet) rather than through chatd.
	Direct() bool
	// PresignPut returns a URL (and the headers the PUT must carry) that
	// stores exactly size bytes under key until ttl passes.
	PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, map[string]string, error)
	// PresignGet returns a URL that reads key until ttl passes, answered
	// with contentType and Content-Disposition disposition.
	PresignGet(ctx context.Context, key string, ttl time.Duration, contentType, disposition string) (string, error)
}

// ThumbnailKey is where an attachment's thumbnail is stored beside it:
// deleting an attachment deletes both keys, so a thumbnail never outlives
// its attachment whatever crashed when.
func ThumbnailKey(blobKey string) string { return blobKey + ".thumb" }

// UploadRecord is an upload as the store of record keeps it.
type UploadRecord struct {
	ID             string
	BlobKey        string
	UploaderID     int64
	Purpose        string // PurposeMessage or PurposeAvatar
	ConversationID int64  // 0: an avatar upload not a group's
	Name           string
	DeclaredType   string
	DeclaredSize   int64
	DurationMs     int64 // declared, or read
	State          UploadState
	CreatedAt      time.Time
	URLExpiresAt   time.Time
	CompletedAt    *time.Time
	Seq            int64 // attached: the message
	Caption        string
	// Known once complete.
	ContentType   string
	Size          int64
	SHA256        string
	Width, Height int
	// ThumbState: "" (none: not an image chatd can decode), pending,
	// ready or failed.
	ThumbState string
	Thumbnail  *Thumbnail
}

// Attachment is the record as a message carries it.
func (r UploadRecord) Attachment() Attachment {
	a := Attachment{ID: r.ID, Name: r.Name, ContentType: r.ContentType, Size: r.Size, SHA256: r.SHA256,
		Width: r.Width, Height: r.Height, DurationMs: r.DurationMs, Caption: r.Caption}
	if r.ThumbState == "ready" && r.Thumbnail != nil {
		t := *r.Thumbnail
		a.Thumbnail = &t
	}
	return a
}

// UploadMeta is what chatd learnt of an upload's bytes.
type UploadMeta struct {
	// BlobKey, when set and not the upload's, is where the checked bytes
	// are now: an object store's upload URL stays writable until it
	// expires, so chatd keeps what it checked under a key of its own.
	// The upload's record moves to it, and the previous key is queued
	// for deletion once its URL expired, in the same transaction.
	BlobKey string
	// KeyDeletableAt, with BlobKey, is when the previous key may be
	// deleted: its URL's expiry, or later (the object store may still
	// take a PUT to it then). Never before the URL expired.
	KeyDeletableAt time.Time
	ContentType    string
	Size           int64
	SHA256         string
	Width, Height  int
	DurationMs     int64
	Thumbnail      bool // an image chatd will make a thumbnail of
}

// AttachmentStore keeps uploads, attachments and the blob deletion
// queue in the store of record (store.Attachments). A blob is deleted
// only through the queue, which is written in the transaction that drops
// what referenced it: a crash between PostgreSQL and the blob store
// leaves a queue row, never an orphan.
type AttachmentStore interface {
	// CreateUpload records r (pending) if it is an avatar's or its
	// uploader is a member of its conversation (blocked: the blocked
	// member of a direct one) and, with a bytes-per-day quota (> 0), the day's
	// declared bytes stay within it (rate_limited, retry at midnight UTC).
	CreateUpload(ctx context.Context, r UploadRecord, quotaBytes int64) error
	// CreateKeyedUpload is CreateUpload claiming the uploader's key: when
	// the uploader made an upload with key before (or makes it meanwhile),
	// it writes and charges nothing and returns that upload (created
	// false). A key's claim goes with its upload (deleted, expired).
	CreateKeyedUpload(ctx context.Context, r UploadRecord, key string, quotaBytes int64) (rec UploadRecord, created bool, err error)
	// UploadByKey reads the upload asked.UploaderID made with key (found
	// false: none, or it is gone), once they may still upload into
	// asked's conversation, as CreateUpload checks (not_member, blocked):
	// a ticket asked again is refused as a new one would be.
	UploadByKey(ctx context.Context, asked UploadRecord, key string) (rec UploadRecord, found bool, err error)
	// UploadAccess refuses r's uploader who may not upload into r's
	// conversation (not_found, not_member, blocked; an avatar's is
	// anyone's), the rule CreateUpload checks: a ticket, its bytes and
	// their completion are leave to write there.
	UploadAccess(ctx context.Context, r UploadRecord) error
	GetUpload(ctx context.Context, id string) (UploadRecord, error)
	// CompleteUpload moves a pending upload to complete (and to
	// m.BlobKey, see UploadMeta, whose deletion queued before it was
	// written is taken back); false when it was not pending any more
	// (then nothing changed).
	CompleteUpload(ctx context.Context, id string, m UploadMeta) (bool, error)
	// DropUpload deletes an upload not attached to any message and
	// queues its blob's deletion for notBefore (a presigned PUT may
	// still write it until then).
	DropUpload(ctx context.Context, id string, notBefore time.Time) error
	// QueueBlobDeletion queues a blob nothing references (bytes written
	// for an upload that went meanwhile).
	QueueBlobDeletion(ctx context.Context, key, reason string, notBefore time.Time) error
	// SetThumbnail records the thumbnail made for id, whose bytes are
	// blobKey (nil: it could not be made), and takes back the deletion of
	// blobKey queued while it was made. false: the attachment is gone or
	// recalled; blobKey was queued for deletion again, thumbnail
	// included.
	SetThumbnail(ctx context.Context, id, blobKey string, t *Thumbnail) (bool, error)
	// PendingThumbnails lists complete or attached images still waiting
	// for their thumbnail (after a restart).
	PendingThumbnails(ctx context.Context, limit int) ([]UploadRecord, error)
	// Attachment returns what userID may fetch (see Attachments).
	Attachment(ctx context.Context, id string, userID int64) (UploadRecord, error)
	// ExpireUploads drops up to limit uploads never used (attached, or
	// made an avatar) and created before cutoff, queueing their blobs
	// for urlGrace after their URL expired (the object store may still
	// take a PUT to it until then); it returns how many.
	ExpireUploads(ctx context.Context, cutoff time.Time, urlGrace time.Duration, limit int) (int, error)
	// ForgetPastQuotas deletes the bytes-per-day quota of the days
	// before yesterday (UTC), which nothing reads again; it returns how
	// many user-days it forgot.
	ForgetPastQuotas(ctx context.Context) (int64, error)
	// DeleteBlobs claims up to limit due deletions, calls del for each
	// key and forgets those del succeeded for, in one transaction: a
	// crash forgets nothing. It returns how many were done.
	DeleteBlobs(ctx context.Context, limit int, del func(ctx context.Context, key string) error) (int, error)
}

// CreateUpload validates an upload request, charges the uploader's
// upload rate limit and asks the attachment subsystem for a ticket. A
// request repeated with its key (a retry whose answer was lost) answers
// the first upload's ticket (Retried) and is charged nothing: it is
// looked up before the rate is charged, and the charge of one that
// raced with the first is given back.
func (s *Service) CreateUpload(ctx context.Context, req UploadRequest) (UploadTicket, error) {
	a, err := s.attachments()
	if err != nil {
		return UploadTicket{}, err
	}
	switch req.Purpose {
	case "", PurposeMessage:
		req.Purpose = PurposeMessage
		if err := ValidateID("conversationId", req.ConversationID); err != nil {
			return UploadTicket{}, err
		}
	case PurposeAvatar:
		if req.ConversationID != 0 {
			return UploadTicket{}, Errorf(CodeInvalid, `an avatar upload has no conversationId: a group takes it with PATCH /v1/conversations/{id} {"avatarUploadId"}`)
		}
	default:
		return UploadTicket{}, Errorf(CodeInvalid, `purpose must be "message" or "avatar"`)
	}
	if req.Size <= 0 {
		return UploadTicket{}, Errorf(CodeInvalid, "size must be the file's size in bytes, at least 1")
	}
	if req.DurationMs < 0 || req.DurationMs > MaxDurationMs {
		return UploadTicket{}, Errorf(CodeInvalid, "durationMs must be between 0 and %d", int64(MaxDurationMs))
	}
	if req.Key != "" {
		if req.Key, err = ValidateClientMsgID(req.Key); err != nil {
			return UploadTicket{}, err
		}
		if t, err := a.RetriedUpload(ctx, req); err != nil || t.Retried {
			return t, err
		}
	}
	if err := s.take(ctx, RateUpload, UserKey(req.UserID)); err != nil {
		return UploadTicket{}, err
	}
	t, err := a.CreateUpload(ctx, req)
	if err == nil && t.Retried {
		s.refund(context.WithoutCancel(ctx), RateUpload, UserKey(req.UserID))
	}
	switch ErrorCode(err) {
	case CodeUnavailable, CodeInternal, CodeInvalid, CodeTooLarge, CodeUnsupported, CodeConflict, CodeGone:
		// Nothing was recorded: the server failed, or the request was
		// refused on its face (a file too large, a type not allowed, a
		// key that made another upload or one whose URL expired).
		if err != nil {
			s.refund(context.WithoutCancel(ctx), RateUpload, UserKey(req.UserID))
		}
	}
	return t, err
}

// PutUpload streams an upload's bytes (chatd's own upload URL).
func (s *Service) PutUpload(ctx context.Context, userID int64, uploadID string, body io.Reader, length int64) (Upload, error) {
	return s.onUpload(uploadID, func(a Attachments) (Upload, error) {
		return a.PutUpload(ctx, userID, uploadID, body, length)
	})
}

// CompleteUpload checks an upload sent to the object store.
func (s *Service) CompleteUpload(ctx context.Context, userID int64, uploadID string) (Upload, error) {
	return s.onUpload(uploadID, func(a Attachments) (Upload, error) {
		return a.CompleteUpload(ctx, userID, uploadID)
	})
}

// GetUpload reports where the caller's upload stands.
func (s *Service) GetUpload(ctx context.Context, userID int64, uploadID string) (Upload, error) {
	return s.onUpload(uploadID, func(a Attachments) (Upload, error) {
		return a.GetUpload(ctx, userID, uploadID)
	})
}

// onUpload is a call about one upload: op runs on the attachments port
// once there is one and uploadID is an id chatd hands out.
func (s *Service) onUpload(uploadID string, op func(Attachments) (Upload, error)) (Upload, error) {
	a, err := s.attachments()
	if err != nil {
		return Upload{}, err
	}
	if err := ValidateUploadID("uploadId", uploadID); err != nil {
		return Upload{}, err
	}
	return op(a)
}

// OpenAttachment hands a member an attachment or its thumbnail.
func (s *Service) OpenAttachment(ctx context.Context, userID int64, id string, thumbnail bool) (Download, error) {
	a, err := s.attachments()
	if err != nil {
		return Download{}, err
	}
	// An id of another shape is malformed input, 400 as on every route
	// (an upload's too): a 404 would tell a client that mangled the id
	// (a path built wrong, a truncated link) that the file is gone.
	if err := ValidateUploadID("attachment id", id); err != nil {
		return Download{}, err
	}
	return a.OpenAttachment(ctx, userID, id, thumbnail)
}

func (s *Service) attachments() (Attachments, error) {
	if s.Attachments == nil {
		return nil, Errorf(CodeNotFound, "attachments are not enabled on this server")
	}
	return s.Attachments, nil
}

// SizesText is a size and the limit it is over, as a refusal shows them:
// each as SizeText says it, with the exact byte counts after both where
// the two would read the same (a file one byte over 25 MiB is not "25.0
// MiB, the limit is 25.0 MiB").
func SizesText(size, limit int64) (string, string) {
	s, l := SizeText(size), SizeText(limit)
	if s == l && size != limit && size >= 1<<10 {
		return fmt.Sprintf("%s (%d bytes)", s, size), fmt.Sprintf("%s (%d bytes)", l, limit)
	}
	return s, l
}

// SizeText is a byte count as messages show it: in MiB from 1 MiB, in KiB
// from 1 KiB, else in bytes (a quota of 1000 bytes is not "0 MiB").
func SizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
