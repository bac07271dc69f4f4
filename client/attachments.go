package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/media"
)

// The attachment types are the server's own (docs/protocol.md
// "Attachments"), so what the client decodes is what chatd encodes.
type (
	// Attachment is a file a message carries: ContentType is what chatd
	// sniffed from the bytes, SHA256 is of the bytes Download returns;
	// Ref names it for another send.
	Attachment = chat.Attachment
	// Thumbnail is a small JPEG of an image attachment (DownloadThumbnail).
	Thumbnail = chat.Thumbnail
	// AttachmentRef names an upload a message carries, with its caption.
	AttachmentRef = chat.AttachmentRef
)

// UploadOptions tune Upload.
type UploadOptions struct {
	// ContentType declares the file's type; "" takes it from the name's
	// extension (the client's own table for the types chatd accepts, such
	// as .heic, .avif, .mov or .7z, then Go's mime package and the
	// system's tables), else from the first bytes, named as chatd's
	// sniffer names them (a HEIC or AVIF by its ftyp brands). chatd
	// checks it against the bytes either way.
	ContentType string
	// DurationMs is an audio or video file's length, when known (chatd
	// reads it itself from WAV, MP4, Ogg and WebM files that say it).
	DurationMs int64
	// Progress, when set, is called as bytes are sent (sent of total).
	Progress func(sent, total int64)
	// Attempts bounds the PUTs of the bytes (default 6): a PUT cut short
	// by the network is sent again from the start, one refused for now
	// (429, 503) once the time its answer says has passed (a refusal
	// asking for more than 5 minutes, or for longer than the context has
	// left, is returned at once). It also bounds the ticket requests
	// refused for now. A PUT whose URL no longer takes the file (expired,
	// or its upload deleted) is followed by a new ticket only if an
	// attempt is left to send the file to: chatd charges a ticket as it
	// is taken.
	Attempts int
	// Purpose is "" (or "message") for a message's file, "avatar" for a
	// picture to name as ProfileUpdate.AvatarUploadID or
	// GroupUpdate.AvatarUploadID (UploadAvatar); an avatar upload has no
	// conversation.
	Purpose string
}

type uploadState struct {
	UploadID   string      `json:"uploadId"`
	State      string      `json:"state"`
	Seq        int64       `json:"seq"`
	Attachment *Attachment `json:"attachment"`
}

// Upload uploads a file for a conversation and returns it as a message
// will carry it; send it with SendMessage(…, SendOptions{Attachments:
// []AttachmentRef{a.Ref()}}). The ticket comes over MQTT (RPC
// upload.create); the bytes go to chatd's HTTP API (Config.HTTPURL) or
// straight to the object store, and a PUT cut short is sent again from
// the start, so r is read once into a temporary file unless it can be
// re-read itself (an *os.File, *bytes.Reader, *strings.Reader or any
// io.ReadSeeker).
func (c *Client) Upload(ctx context.Context, conversationID int64, name string, r io.Reader) (Attachment, error) {
	return c.UploadWithOptions(ctx, conversationID, name, r, UploadOptions{})
}

// UploadAvatar uploads a picture (JPEG, PNG, GIF or WebP) for an avatar
// and returns it; Attachment.ID is what ProfileUpdate.AvatarUploadID or
// GroupUpdate.AvatarUploadID names, once.
func (c *Client) UploadAvatar(ctx context.Context, name string, r io.Reader) (Attachment, error) {
	return c.UploadWithOptions(ctx, 0, name, r, UploadOptions{Purpose: chat.PurposeAvatar})
}

// UploadWithOptions is Upload with a declared type, duration, progress or
// purpose (conversationID is ignored for an avatar).
func (c *Client) UploadWithOptions(ctx context.Context, conversationID int64, name string, r io.Reader, o UploadOptions) (Attachment, error) {
	ctx, cancel, err := c.untilClose(ctx)
	if err != nil {
		return Attachment{}, err
	}
	defer cancel()
	a, err := c.upload(ctx, conversationID, name, r, o)
	if err != nil && c.life.Err() != nil {
		return Attachment{}, ErrClosed
	}
	return a, err
}

func (c *Client) upload(ctx context.Context, conversationID int64, name string, r io.Reader, o UploadOptions) (Attachment, error) {
	src, err := newSource(r)
	if err != nil {
		return Attachment{}, err
	}
	defer src.close()
	if src.size <= 0 {
		return Attachment{}, &Error{Op: "upload", Code: "invalid", Message: "the file is empty"}
	}
	ctype := o.ContentType
	if ctype == "" {
		ctype = guessType(name, src)
	}
	attempts := o.Attempts
	if attempts <= 0 {
		attempts = 6
	}
	params := map[string]any{"name": filepath.Base(name), "contentType": ctype, "size": src.size, "durationMs": o.DurationMs}
	if o.Purpose == chat.PurposeAvatar {
		params["purpose"] = o.Purpose
	} else {
		params["conversationId"] = conversationID
	}
	var t chat.UploadTicket
	// Each ticket asked for carries a key of its own (clientMsgId), so a
	// request whose reply was lost with its connection is asked again
	// and chatd answers the upload the first made, charged once; a new
	// ticket (the URL expired) is a new key. A refusal that says when to
	// ask again (rate limited, chatd busy) is asked again then, within
	// the attempts.
	// sent: a PUT of the bytes went to t's URL, and may have got through
	// with its answer lost. inBucket: every byte of one went to t's
	// object-store URL (or the store answered it 2xx), the store's answer
	// or the completion's lost: the bucket may hold them, which chatd
	// learns of from the completion only.
	sent, inBucket := false, false
	newTicket := func() error {
		params["clientMsgId"] = uuid.NewString()
		sent, inBucket = false, false
		for n := 1; ; n++ {
			err := c.call(ctx, "upload.create", params, &t, true)
			if n >= attempts || !c.askAgainLater(ctx, n, err) {
				return err
			}
		}
	}
	if err := newTicket(); err != nil {
		return Attachment{}, err
	}
	// renewed: chatd deleted an upload of this Upload before its bytes
	// were completed (its upload_ttl past while the URL was still valid:
	// a URL's life is no promise that the upload lives as long), and a
	// new ticket was taken. Its URL may still take bytes, but chatd no
	// longer has an upload to complete them into: PUT there, they were
	// stored for nothing and the completion failed the Upload with
	// not_found, whose caller's retry charged the file once more. The new
	// ticket is taken once; deleted again, the Upload fails saying so.
	renewed := false
	renew := func(err error) error {
		if renewed {
			return fmt.Errorf("upload %s: chatd deleted its upload %s again before the bytes were completed (is its upload_ttl shorter than upload_url_expiry?): %w", name, t.UploadID, err)
		}
		renewed = true
		c.cfg.Logger.Info("chatd deleted the upload before its bytes were completed; taking a new ticket", "name", name, "upload", t.UploadID, "err", err)
		return newTicket()
	}
	// ticketForNext takes a new ticket (take: newTicket, or renew) for
	// the attempt after attempt to send the file to, t's URL taking it
	// no more (expired, refused, or its upload deleted). On the Upload's
	// last attempt it takes none and reports false: chatd charges a
	// ticket against the day's upload bytes and the upload rate as it is
	// taken, and no attempt would be left to send the file to it.
	ticketForNext := func(attempt int, take func() error) (bool, error) {
		if attempt+1 >= attempts {
			return false, nil
		}
		return true, take()
	}
	var last error
	// stored: chatd answered 409, complete already: an earlier PUT got
	// through but its answer was lost (chatd answers the same bytes sent
	// again as the first, but a 409 says the upload is complete with the
	// bytes first sent, the file having changed since, or a chatd that
	// did not compare them). What is left is reading the upload, retried
	// like a PUT; sending the bytes again is pointless.
	stored := false
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			if !sleepCtx(ctx, c.retryDelay(attempt, last)) {
				return Attachment{}, fmt.Errorf("upload %s: %w (last attempt: %w)", name, ctx.Err(), last)
			}
			if inBucket {
				// Completed, before or after the URL expired, they are
				// neither sent again nor charged again on a new ticket.
				a, done, deleted, err := c.settle(ctx, t, src.size, ctype, attempts)
				switch {
				case deleted:
					// Nothing to complete them into: they go to a new
					// ticket's URL, not again to this one's.
					if err := renew(err); err != nil {
						return Attachment{}, err
					}
				case err != nil && settleAgain(ctx, err):
					// chatd not reached, or unable for now: the bytes
					// may still be in the bucket, and the next attempt
					// completes them, where failing the Upload had its
					// caller's retry store and charge them again.
					last = err
					c.cfg.Logger.Info("completing an upload failed for now; completing it again", "name", name, "attempt", attempt+1, "err", err)
					continue
				case err != nil || done:
					return a, err
				default:
					sent, inBucket = false, false // they never arrived
				}
			}
			if !stored && time.Until(t.ExpiresAt) < 30*time.Second {
				// A PUT that failed may have stored the file, its answer
				// lost: a new ticket would upload it again, a second blob
				// charged again against the day's bytes.
				if sent {
					if a, done, err := c.readSentBefore(ctx, t, src.size, ctype, attempts, "whose URL is about to expire after a PUT whose answer was lost"); err != nil || done {
						return a, err
					}
				}
				if err := newTicket(); err != nil {
					return Attachment{}, err
				}
			}
		}
		var up uploadState
		var err error
		if stored {
			err = c.call(ctx, "upload.get", map[string]any{"uploadId": t.UploadID}, &up, true)
		} else {
			sent = true
			up, err = c.putBytes(ctx, t, src, o.Progress, &inBucket)
		}
		if err == nil {
			if up.Attachment == nil {
				return Attachment{}, fmt.Errorf("upload %s: chatd answered without the attachment", name)
			}
			return *up.Attachment, nil
		}
		var ce *Error
		if !stored && errors.As(err, &ce) && ce.Code == "conflict" {
			stored, last = true, err
			attempt-- // the read is no new attempt at the bytes
			continue
		}
		if !stored && errors.As(err, &ce) && ce.Code == "gone" {
			// The URL expired before (or while) the bytes came: chatd
			// answers so whatever became of the upload, so an earlier
			// PUT whose answer was lost may have completed it.
			if a, done, err := c.readSentBefore(ctx, t, src.size, ctype, attempts, "whose URL expired"); err != nil || done {
				return a, err
			}
			last = err // what the attempts ended on, if they all do
			if taken, err := ticketForNext(attempt, newTicket); err != nil {
				return Attachment{}, err
			} else if !taken {
				break // the attempts are spent, on err
			}
			continue
		}
		if !stored && inBucket && errors.Is(err, ErrNotFound) && errors.As(err, &ce) && ce.Op == "rpc upload.complete" {
			// The store took the bytes, but chatd deleted the upload
			// before they were completed (see renewed).
			if taken, rerr := ticketForNext(attempt, func() error { return renew(err) }); rerr != nil {
				return Attachment{}, rerr
			} else if !taken {
				return Attachment{}, fmt.Errorf("upload %s: chatd deleted its upload %s before the bytes were completed, no attempt left to send them to a new one: %w", name, t.UploadID, err)
			}
			last = err
			continue
		}
		if !stored && inBucket && errors.As(err, &ce) && ce.Code == "invalid" && ce.Op == "rpc upload.complete" {
			// The store answered the PUT, yet chatd found nothing under
			// its URL (a store that shows an object late). Still pending,
			// the next attempt completes the bytes first (settle) and
			// PUTs them again only if they are still not there, rather
			// than the caller's Upload again storing and charging them a
			// second time on a new ticket. No longer pending, another
			// completion took them (completeWon): complete with this
			// file, it is the answer.
			st, gerr := callFor[uploadState](ctx, c, "upload.get", map[string]any{"uploadId": t.UploadID}, true)
			if gerr == nil && st.State == "pending" {
				last = err
				c.cfg.Logger.Info("upload not in the store yet; completing it again", "name", name, "attempt", attempt+1, "err", err)
				continue
			}
			if gerr == nil {
				if a, done, err := sentBefore(st, t, src.size, ctype, completeWon); err != nil || done {
					return a, err
				}
			}
		}
		// A completion that did not reach chatd (its connection down for
		// the request's time) leaves bytes the bucket holds: the next
		// attempt completes them (settle).
		if !retryableUpload(err) && !(inBucket && settleAgain(ctx, err)) {
			return Attachment{}, err
		}
		if toldTooLong(ctx, err) {
			return Attachment{}, err
		}
		last = err
		c.cfg.Logger.Info("upload interrupted; sending it again", "name", name, "attempt", attempt+1, "err", err)
	}
	return Attachment{}, fmt.Errorf("upload %s: gave up after %d attempts: %w", name, attempts, last)
}

// readSentBefore reads the upload of ticket t, whose URL expired (or is about
// to) after a PUT that may have got through, or whose completion of the
// bytes such a PUT sent answered another upload than this file's (why
// says which, in the words of an error: "upload ID, why, is not uploaded
// again: ..."): done with its attachment when
// it is complete with the file sent (size bytes of the declared type, as
// chatd serves it: the declared type or, sniffed, another of its kind);
// not done when it is still pending (or gone with its bytes, deleted
// after upload_ttl), for a new ticket; an error when it is neither, since
// a new ticket would only upload again a file that is no longer waiting
// to be sent, or one that is not this file. A refusal for now is asked
// again as a ticket is.
func (c *Client) readSentBefore(ctx context.Context, t chat.UploadTicket, size int64, declared string, attempts int, why string) (Attachment, bool, error) {
	var up uploadState
	var err error
	for n := 1; ; n++ {
		err = c.call(ctx, "upload.get", map[string]any{"uploadId": t.UploadID}, &up, true)
		if n >= attempts || !c.askAgainLater(ctx, n, err) {
			break
		}
	}
	if errors.Is(err, ErrNotFound) {
		return Attachment{}, false, nil
	}
	if err != nil {
		return Attachment{}, false, fmt.Errorf("upload %s, %s: read it: %w", t.UploadID, why, err)
	}
	return sentBefore(up, t, size, declared, why)
}

// settleAgain reports whether settle failed for now: chatd not reached
// (its connection down for the request's time, which the call's own
// timeout ends: no *Error says so), unable, or busy for a while Upload
// waits out, with ctx still running.
func settleAgain(ctx context.Context, err error) bool {
	if ctx.Err() != nil || toldTooLong(ctx, err) {
		return false
	}
	return retryableUpload(err) || errors.Is(err, ErrUnavailable)
}

// sentBefore is readSentBefore's verdict on up, the upload of ticket t as
// chatd answered it.
func sentBefore(up uploadState, t chat.UploadTicket, size int64, declared string, why string) (Attachment, bool, error) {
	// The status is the one chatd gives its code, not the answer that
	// made the read: a 200 completion, or none (the URL about to expire).
	status := map[string]int{"conflict": http.StatusConflict, "gone": http.StatusGone}
	refused := func(code, format string, args ...any) (Attachment, bool, error) {
		st, ok := status[code]
		if !ok {
			st = http.StatusInternalServerError
		}
		return Attachment{}, false, &Error{Op: "upload", Code: code, Status: st,
			Message: fmt.Sprintf("upload %s, %s, is not uploaded again: ", t.UploadID, why) + fmt.Sprintf(format, args...)}
	}
	switch up.State {
	case "pending":
		return Attachment{}, false, nil
	case "complete":
		a := up.Attachment
		if a == nil {
			return refused("internal", "chatd answered it complete without its attachment")
		}
		if a.Size != size || !sameKind(a.ContentType, declared) {
			return refused("conflict", "it holds %d bytes of %s, not the %d bytes of %s sent", a.Size, a.ContentType, size, declared)
		}
		return *a, true, nil
	case "attached":
		return refused("conflict", "it was sent already, in message %d", up.Seq)
	case "avatar":
		return refused("conflict", "it is in use as an avatar already")
	case "recalled":
		return refused("gone", "it was sent and recalled: upload the file again to send it")
	case "released":
		return refused("gone", "it was an avatar, replaced or cleared since: upload the file again")
	default:
		return refused("conflict", "it is %s, neither pending nor complete", up.State)
	}
}

// completeWon says why an upload is read after its completion found
// nothing under the URL: another completion of the same bytes may have
// won and taken them (the one whose reply was lost, sent again to
// another node while the first still ran there), the upload then
// complete with them.
const completeWon = "whose completion found nothing under its URL"

// settle completes the upload of object-store ticket t, every byte of
// which went to its URL on an attempt before, the store's answer or the
// completion's lost: chatd answers the completion after t's URL expired
// too, so bytes the store took are completed, never sent nor charged
// again. Done with the attachment once complete with the file (as
// readSentBefore checks it); not done when nothing is under the URL (400,
// the upload still pending), for the bytes to go again to t's URL;
// deleted, with the completion's refusal, when the upload went, bytes
// and all (404, 410: deleted after upload_ttl, which may pass while the
// URL still takes bytes), for the bytes to go to a new ticket's URL; an
// error otherwise (a 400 whose upload is gone: chatd refused the bytes).
// A refusal for now is asked again as a ticket is.
func (c *Client) settle(ctx context.Context, t chat.UploadTicket, size int64, declared string, attempts int) (a Attachment, done, deleted bool, err error) {
	var up uploadState
	for n := 1; ; n++ {
		err = c.call(ctx, "upload.complete", map[string]any{"uploadId": t.UploadID}, &up, true)
		if n >= attempts || !c.askAgainLater(ctx, n, err) {
			break
		}
	}
	var ce *Error
	switch {
	case err == nil:
		if up.State == "complete" && up.Attachment != nil && up.Attachment.Size == size && sameKind(up.Attachment.ContentType, declared) {
			return *up.Attachment, true, false, nil
		}
		// Not the upload this file made, or no longer waiting to be
		// sent: readSentBefore says which.
		a, done, err := c.readSentBefore(ctx, t, size, declared, attempts, "whose bytes an earlier PUT sent, its answer or the completion's lost")
		return a, done, false, err
	case errors.Is(err, ErrNotFound), errors.As(err, &ce) && ce.Code == "gone":
		return Attachment{}, false, true, err
	case errors.As(err, &ce) && ce.Code == "invalid":
		// Nothing under the URL (the upload stays pending), or bytes of
		// another size (a refusal: the upload is deleted), or a
		// completion of them that won meanwhile (completeWon).
		st, gerr := callFor[uploadState](ctx, c, "upload.get", map[string]any{"uploadId": t.UploadID}, true)
		if gerr == nil && st.State == "pending" {
			return Attachment{}, false, false, nil
		}
		if gerr == nil {
			a, done, err := sentBefore(st, t, size, declared, completeWon)
			return a, done, false, err
		}
		return Attachment{}, false, false, fmt.Errorf("upload %s: complete the bytes sent before: %w", t.UploadID, err)
	default:
		return Attachment{}, false, false, fmt.Errorf("upload %s: complete the bytes sent before: %w", t.UploadID, err)
	}
}

// sameKind: chatd serves an upload as its declared type, or as what its
// bytes are when their signature names another type of the same kind (a
// PNG declared as image/jpeg), never of another kind (media.Sniff).
func sameKind(served, declared string) bool {
	d, err := chat.NormalizeMediaType(declared)
	if err != nil {
		return false
	}
	if served == d {
		return true
	}
	major := func(t string) string { m, _, _ := strings.Cut(t, "/"); return m }
	return major(served) == major(d) && major(d) != "application" && major(d) != "text"
}

// retryableUpload: the network broke or chatd was briefly unable; a
// refusal for the bytes themselves is final.
func retryableUpload(err error) bool {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code == "unavailable" || ce.Code == "internal" || ce.Code == "rate_limited" ||
			(ce.Code == "invalid" && strings.Contains(ce.Message, "cut short"))
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrClosed)
}

// putBytes sends the bytes where the ticket says and, for an object
// store, completes the upload. *inBucket is set once the store may hold
// them: it answered 2xx, or its transport sent every byte, whatever
// became of the answer.
func (c *Client) putBytes(ctx context.Context, t chat.UploadTicket, src *source, progress func(int64, int64), inBucket *bool) (uploadState, error) {
	body, err := src.open()
	if err != nil {
		return uploadState{}, err
	}
	if progress != nil {
		body = &progressReader{r: body, total: src.size, fn: progress}
	}
	own := strings.HasPrefix(t.URL, "/")
	counted := &countingReader{r: body}
	body = counted
	if !own {
		defer func() {
			if counted.n.Load() >= src.size {
				*inBucket = true
			}
		}()
	}
	url := t.URL
	if own {
		if c.cfg.HTTPURL == "" {
			return uploadState{}, &Error{Op: "upload", Code: "invalid",
				Message: "chatd keeps files on its own disk: set Config.HTTPURL (e.g. http://127.0.0.1:8080) to upload"}
		}
		url = c.cfg.HTTPURL + t.URL
	}
	method := t.Method
	if method == "" {
		method = http.MethodPut
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return uploadState{}, fmt.Errorf("upload: %w", err)
	}
	req.ContentLength = src.size
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	if own {
		if err := c.authorize(ctx, req); err != nil {
			return uploadState{}, err
		}
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return uploadState{}, fmt.Errorf("upload: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		if own {
			return uploadState{}, httpError("upload", resp, b)
		}
		// The object store's own answer (XML).
		code := "unavailable"
		if resp.StatusCode == http.StatusForbidden || bytes.Contains(b, []byte("<Code>ExpiredToken</Code>")) {
			// Expired or refused signature, or the temporary credentials
			// it was made with expired (S3 answers that 400): a new ticket.
			code = "gone"
		} else if resp.StatusCode == http.StatusTooManyRequests {
			code = "rate_limited" // sent again after its Retry-After
		} else if resp.StatusCode == http.StatusRequestTimeout || bytes.Contains(b, []byte("<Code>RequestTimeout</Code>")) {
			// The bytes came too slowly (S3 answers it 400): the
			// network's fault, and the same PUT sent again goes through.
			code = "unavailable"
		} else if resp.StatusCode < 500 {
			code = "invalid"
		}
		return uploadState{}, &Error{Op: "upload", Code: code, Status: resp.StatusCode, Message: strings.TrimSpace(string(b)),
			RetryAfter: retryAfterHeader(resp, time.Now())}
	}
	if !own {
		*inBucket = true
	}
	var st uploadState
	if t.CompleteURL != "" {
		// Idempotent: chatd answers a completion sent again (to any node,
		// even while the first runs) with the upload as the first made it,
		// so one whose answer was lost with its connection is sent again
		// on the next, rather than failing this attempt at the bytes.
		err := c.call(ctx, "upload.complete", map[string]any{"uploadId": t.UploadID}, &st, true)
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("upload: decode chatd's answer: %w", err)
	}
	return st, nil
}

// httpError reads chatd's JSON error body of resp (b); a refusal's retry
// delay is the body's error.retryAfter, else the Retry-After header (a
// proxy's answer has no JSON body). An answer without chatd's JSON (a
// proxy's, a load balancer's) is typed by its status as chatd's would be,
// so that a final refusal (413: the same bytes are refused again) is not
// sent again as if chatd were briefly unable.
func httpError(op string, resp *http.Response, b []byte) error {
	var body struct {
		Error errorDetail `json:"error"`
	}
	status := resp.StatusCode
	e := &Error{Op: op, Status: status, Code: "internal"}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.fill(body.Error)
	} else {
		e.Code = statusCode(status)
		e.Message = fmt.Sprintf("%d %s (not an answer of chatd's)", status, http.StatusText(status))
	}
	if e.RetryAfter == 0 {
		e.RetryAfter = retryAfterHeader(resp, time.Now())
	}
	return e
}

// statusCode is the error code of an HTTP status without chatd's JSON
// error: the code chatd itself answers with that status (docs/http.md
// "Errors"). A 409 or 410 is "invalid", not chatd's "conflict" or "gone":
// Upload reads those as chatd's word on the upload (complete already, a
// new ticket), which a proxy's answer is not.
func statusCode(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusUnsupportedMediaType:
		return "unsupported"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status == http.StatusRequestTimeout || status >= 500:
		return "unavailable"
	case status >= 400:
		return "invalid"
	default:
		return "internal"
	}
}

func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	tok := c.cfg.Token
	if c.cfg.TokenFunc != nil {
		t, err := c.cfg.TokenFunc(ctx)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		tok = t
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// http is the client's HTTP client: no overall timeout (a large file on a
// slow network takes what it takes), a bounded wait for headers.
func (c *Client) http() *http.Client {
	c.httpOnce.Do(func() {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c.cfg.TLS
		tr.ResponseHeaderTimeout = 60 * time.Second
		c.httpc = &http.Client{Transport: tr}
	})
	return c.httpc
}

// countingReader counts the bytes read from r (by the transport's
// goroutine, which may still read once the answer came).
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// source is a file Upload can read again from the start.
type source struct {
	size  int64
	open  func() (io.Reader, error)
	close func()
}

func newSource(r io.Reader) (*source, error) {
	if ra, ok := r.(interface {
		io.ReaderAt
		Size() int64
	}); ok { // *bytes.Reader, *strings.Reader, *io.SectionReader
		n := ra.Size()
		return &source{size: n, open: func() (io.Reader, error) { return io.NewSectionReader(ra, 0, n), nil }, close: func() {}}, nil
	}
	if s, ok := r.(io.ReadSeeker); ok { // *os.File
		start, err := s.Seek(0, io.SeekCurrent)
		if err == nil {
			end, err := s.Seek(0, io.SeekEnd)
			if err == nil {
				return &source{size: end - start, close: func() {},
					open: func() (io.Reader, error) {
						if _, err := s.Seek(start, io.SeekStart); err != nil {
							return nil, fmt.Errorf("upload: rewind the file: %w", err)
						}
						return io.LimitReader(s, end-start), nil
					}}, nil
			}
		}
	}
	f, err := os.CreateTemp("", "chatd-upload-*")
	if err != nil {
		return nil, fmt.Errorf("upload: spool the file: %w", err)
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, r)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("upload: spool the file: %w", err)
	}
	return &source{size: n, close: cleanup, open: func() (io.Reader, error) { return io.NewSectionReader(f, 0, n), nil }}, nil
}

// extensionTypes name files chatd accepts by default (chat.DefaultUploadTypes)
// whose extension Go's built-in table lacks, or which the system's tables
// (/etc/mime.types, the shared MIME database, Windows' registry) may lack
// or name as a type chatd refuses for their bytes. Without one of these
// the name's type would be application/octet-stream (a HEIC photo, a 7z
// archive: Go's sniffer knows neither), which chatd refuses (415); a
// .tgz would be application/x-compressed-tar, which is not what chatd
// sniffs (a gzip). They are consulted first, so a type does not depend
// on the machine.
var extensionTypes = map[string]string{
	".heic": "image/heic", ".heif": "image/heif", ".hif": "image/heif", ".avif": "image/avif",
	".mov": "video/quicktime", ".qt": "video/quicktime", ".m4v": "video/mp4",
	".3gp": "video/3gpp", ".3g2": "video/3gpp", ".mkv": "video/x-matroska",
	".aac": "audio/aac", ".amr": "audio/amr", ".weba": "audio/webm", ".caf": "audio/x-caf",
	".md": "text/markdown", ".odt": "application/vnd.oasis.opendocument.text",
	".ods": "application/vnd.oasis.opendocument.spreadsheet",
	".odp": "application/vnd.oasis.opendocument.presentation",
	".7z":  "application/x-7z-compressed", ".rar": "application/vnd.rar",
	".tar": "application/x-tar", ".tgz": "application/gzip",
}

// guessType is the name's extension's type, else (no extension, one no
// table knows, or one of application/octet-stream, which chatd refuses)
// the first bytes' as chatd's own sniffer names them (media.Detect): a
// photo named IMG_0001 is declared image/heic by its ftyp brands, as
// chatd then finds it, where Go's sniffer knows no HEIC.
func guessType(name string, src *source) string {
	ext := strings.ToLower(filepath.Ext(name))
	if t, ok := extensionTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		if mt, _, err := mime.ParseMediaType(t); err == nil && mt != "application/octet-stream" {
			return mt
		}
	}
	head := make([]byte, media.SniffLen)
	if r, err := src.open(); err == nil {
		n, _ := io.ReadFull(r, head)
		head = head[:n]
	}
	return media.Detect(head)
}

type progressReader struct {
	r     io.Reader
	sent  int64
	total int64
	fn    func(int64, int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.sent += int64(n)
		p.fn(p.sent, p.total)
	}
	return n, err
}

// DownloadInfo describes a downloaded attachment.
type DownloadInfo struct {
	Name        string
	ContentType string
	Size        int64 // the whole file's
	Written     int64 // bytes written by this call
}

// Download writes an attachment to w (HTTP GET /v1/attachments/{id}, from
// chatd or, redirected, from the object store). A connection that breaks
// is resumed where it stopped with a Range request, until ctx ends; a
// GET refused for now (429, 503) is sent again once the time its answer
// says (Retry-After) has passed; a refusal asking for more than 5
// minutes, or for longer than ctx has left, is returned at once (package
// documentation, "Retry later").
func (c *Client) Download(ctx context.Context, attachmentID string, w io.Writer) (DownloadInfo, error) {
	return c.DownloadFrom(ctx, attachmentID, w, 0)
}

// DownloadFrom is Download from byte offset on, to resume a file a
// previous run wrote offset bytes of. At the file's end it writes nothing;
// past it (the file on disk is not this attachment) it fails with
// ErrInvalid.
func (c *Client) DownloadFrom(ctx context.Context, attachmentID string, w io.Writer, offset int64) (DownloadInfo, error) {
	return c.download(ctx, "/v1/attachments/"+attachmentID, w, offset)
}

// DownloadThumbnail writes an image attachment's thumbnail to w.
func (c *Client) DownloadThumbnail(ctx context.Context, attachmentID string, w io.Writer) (DownloadInfo, error) {
	return c.download(ctx, "/v1/attachments/"+attachmentID+"/thumbnail", w, 0)
}

func (c *Client) download(ctx context.Context, path string, w io.Writer, offset int64) (DownloadInfo, error) {
	ctx, cancel, err := c.untilClose(ctx)
	if err != nil {
		return DownloadInfo{}, err
	}
	defer cancel()
	info, err := c.downloadResuming(ctx, path, w, offset)
	if err != nil && c.life.Err() != nil {
		return info, ErrClosed
	}
	return info, err
}

func (c *Client) downloadResuming(ctx context.Context, path string, w io.Writer, offset int64) (DownloadInfo, error) {
	var info DownloadInfo
	if c.cfg.HTTPURL == "" {
		return info, &Error{Op: "download", Code: "invalid", Message: "set Config.HTTPURL (e.g. http://127.0.0.1:8080) to download attachments"}
	}
	failures := 0
	var last error
	for {
		done, progressed, err := c.downloadOnce(ctx, path, w, &offset, &info)
		if done {
			return info, nil
		}
		if progressed {
			failures = 0
		}
		// A GET is safe to repeat: chatd unable for now, or the API rate
		// limit, is waited out.
		var ce *Error
		if errors.As(err, &ce) && ce.Code != "unavailable" && ce.Code != "rate_limited" {
			return info, err
		}
		if ctx.Err() != nil {
			return info, fmt.Errorf("download: %w (last attempt: %w)", ctx.Err(), err)
		}
		last = err
		failures++
		if failures > 8 {
			return info, fmt.Errorf("download: gave up after %d attempts without progress: %w", failures, last)
		}
		if toldTooLong(ctx, err) {
			return info, err
		}
		c.cfg.Logger.Info("download interrupted; resuming", "path", path, "at", offset, "err", err)
		if !sleepCtx(ctx, c.retryDelay(failures, last)) {
			return info, fmt.Errorf("download: %w (last attempt: %w)", ctx.Err(), last)
		}
	}
}

// attachmentSize asks for the first byte of the file at path: the
// answer's Content-Range (or a whole file's Content-Length) says its size.
func (c *Client) attachmentSize(ctx context.Context, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.HTTPURL+path, nil)
	if err != nil {
		return 0, err
	}
	if err := c.authorize(ctx, req); err != nil {
		return 0, err
	}
	req.Header.Set("Range", "bytes=0-0")
	resp, err := c.http().Do(req)
	if err != nil {
		return 0, fmt.Errorf("download: ask the size: %w", err)
	}
	defer resp.Body.Close()
	var start, end, size int64
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &start, &end, &size); err == nil {
			return size, nil
		}
	case resp.StatusCode == http.StatusOK && resp.ContentLength >= 0:
		return resp.ContentLength, nil
	case resp.StatusCode/100 != 2:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, httpError("download", resp, b)
	}
	// Asked again, the same server answers the same: final, not a
	// network failure to retry.
	return 0, &Error{Op: "download", Code: "invalid", Status: resp.StatusCode,
		Message: fmt.Sprintf("the size of %s is not said (status %d, Content-Range %q)", path, resp.StatusCode, resp.Header.Get("Content-Range"))}
}

// downloadOnce is one GET from *offset; done when the file is whole.
func (c *Client) downloadOnce(ctx context.Context, path string, w io.Writer, offset *int64, info *DownloadInfo) (done, progressed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.HTTPURL+path, nil)
	if err != nil {
		return false, false, err
	}
	if err := c.authorize(ctx, req); err != nil {
		return false, false, err
	}
	if *offset > 0 {
		// Attachments never change (their ETag is their sha256), so the
		// rest is the rest of the same bytes.
		req.Header.Set("Range", "bytes="+strconv.FormatInt(*offset, 10)+"-")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return false, false, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	skip := int64(0)
	switch resp.StatusCode {
	case http.StatusOK:
		info.Size, skip = resp.ContentLength, *offset // the whole file: skip what we have
		if info.Size >= 0 && *offset > info.Size {
			// The Range was ignored (a proxy): the file says its size as
			// a 416 would.
			return false, false, &Error{Op: "download", Code: "invalid", Message: fmt.Sprintf("offset %d is past the end of the file (%d bytes)", *offset, info.Size)}
		}
	case http.StatusPartialContent:
		var start, end, size int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &start, &end, &size); err != nil || start != *offset {
			return false, false, fmt.Errorf("download: unexpected Content-Range %q", resp.Header.Get("Content-Range"))
		}
		info.Size = size
	case http.StatusRequestedRangeNotSatisfiable:
		// The offset is at or past the end: the answer's Content-Range
		// (bytes */size) says which. A file longer than the attachment is
		// not the attachment.
		var size int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes */%d", &size); err != nil {
			// Not said (an object store's or a proxy's answer): ask.
			if size, err = c.attachmentSize(ctx, path); err != nil {
				return false, false, err
			}
		}
		info.Size = size
		if *offset != size {
			return false, false, &Error{Op: "download", Code: "invalid", Message: fmt.Sprintf("offset %d is past the end of the file (%d bytes)", *offset, size)}
		}
		return true, false, nil
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, false, httpError("download", resp, b)
	}
	info.ContentType = resp.Header.Get("Content-Type")
	if _, p, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		info.Name = p["filename"]
	}
	if skip > 0 {
		if n, err := io.CopyN(io.Discard, resp.Body, skip); err != nil {
			if err == io.EOF {
				// The whole file, ended cleanly before the offset (a cut
				// connection is ErrUnexpectedEOF): sent again, it ends
				// there again.
				return false, false, &Error{Op: "download", Code: "invalid", Message: fmt.Sprintf("offset %d is past the end of the file (%d bytes)", *offset, n)}
			}
			return false, false, fmt.Errorf("download: %w", err)
		}
	}
	n, err := io.Copy(w, resp.Body)
	*offset += n
	info.Written += n
	if err != nil {
		return false, n > 0, fmt.Errorf("download: cut after %d bytes: %w", *offset, err)
	}
	if info.Size >= 0 && *offset < info.Size {
		return false, n > 0, fmt.Errorf("download: %d of %d bytes", *offset, info.Size)
	}
	return true, n > 0, nil
}
