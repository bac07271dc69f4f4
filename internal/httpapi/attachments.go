package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	chat "github.com/chatd/chatd"
)

// uploadParams: RPC upload.create, whose optional clientMsgId is the
// Idempotency-Key header of POST /v1/uploads, whose body is the rest
// (newUpload).
type uploadParams struct {
	newUpload
	ClientMsgID string `json:"clientMsgId"`
}

// newUpload is POST /v1/uploads's body (purpose absent: a message's).
type newUpload struct {
	Purpose        string `json:"purpose"`
	ConversationID int64  `json:"conversationId"`
	Name           string `json:"name"`
	ContentType    string `json:"contentType"`
	Size           int64  `json:"size"`
	DurationMs     int64  `json:"durationMs"`
}

func bindCreateUpload(a *API, w http.ResponseWriter, r *http.Request, p *uploadParams) error {
	var err error
	if p.ClientMsgID, err = idempotencyHeader(r); err != nil {
		return err
	}
	return a.bindBody(w, r, &p.newUpload)
}

// createUpload answers 201 with the ticket: where to PUT the bytes; 200
// with the ticket of the upload a request with the same key made before
// (a retry whose answer was lost).
func createUpload(a *API, ctx context.Context, user int64, p uploadParams) (int, any, error) {
	t, err := a.svc.CreateUpload(ctx, chat.UploadRequest{Purpose: p.Purpose, ConversationID: p.ConversationID, UserID: user, Name: p.Name,
		ContentType: p.ContentType, Size: p.Size, DurationMs: p.DurationMs, Key: p.ClientMsgID})
	return createdReply(t, !t.Retried, err)
}

// uploadIDParams: the upload named by the path (RPC: uploadId).
type uploadIDParams struct {
	UploadID string `json:"uploadId"`
}

func bindUploadID(a *API, w http.ResponseWriter, r *http.Request, p *uploadIDParams) error {
	p.UploadID = r.PathValue("id")
	return a.bindNoBody(w, r)
}

func getUpload(a *API, ctx context.Context, user int64, p uploadIDParams) (int, any, error) {
	return okReply(a.svc.GetUpload(ctx, user, p.UploadID))
}

// completeUpload checks the bytes a client PUT to the object store.
func completeUpload(a *API, ctx context.Context, user int64, p uploadIDParams) (int, any, error) {
	return okReply(a.svc.CompleteUpload(ctx, user, p.UploadID))
}

// transferIdle is how long an upload's PUT may take to deliver a
// putPiece, or a download's client to take a sendPiece, before chatd
// gives up on it: long enough for a phone in a tunnel, short enough that
// a dead connection, or one kept barely alive, does not hold an upload,
// a file and a handler.
const transferIdle = 60 * time.Second

// putPiece is what a PUT must deliver within the idle time (or the rest
// of its body): 16 KiB a minute, some 2 kbit/s, a tenth of a 2G link's
// 20 kbit/s, which sends it in under 7 s and so may stall for 50 s of
// every minute; yet a client cannot hold an upload, its file and its
// handler for ever by sending a byte per idle time.
const putPiece = 16 << 10

// putBody is a PUT's body with a read deadline per putPiece (a slow
// upload may take many minutes; one that stalls, or trickles below a
// piece per idle time, ends) that a new PUT of the same upload can cut
// short (Interrupt).
type putBody struct {
	r    *http.Request
	rc   *http.ResponseController
	idle time.Duration
	// piece counts the bytes of the piece under way, -1 before the first
	// read: the next read starts a piece and its deadline.
	piece int
	ended bool // the body was read to its end
}

func (b *putBody) Read(p []byte) (int, error) {
	if b.ended {
		// net/http reads the connection in the background now, with no
		// deadline: one set here would cancel the request when it passed.
		return b.r.Body.Read(p)
	}
	if b.piece < 0 || b.piece >= putPiece {
		b.piece = 0
		_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	n, err := b.r.Body.Read(p)
	b.piece += n
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF):
		b.ended = true
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		err = errUploadStalled
	}
	return n, err
}

func (b *putBody) Interrupt() { _ = b.rc.SetReadDeadline(time.Now()) }

var errUploadStalled = errors.New("the upload stalled or was replaced by a new PUT")

// putUpload takes the bytes of an upload (local disk store): exactly the
// declared size, streamed; 200 with the upload, complete.
func putUpload(a *API, w http.ResponseWriter, r *http.Request, user int64) error {
	body := &putBody{r: r, rc: http.NewResponseController(w), idle: a.transferIdle, piece: -1}
	u, err := a.svc.PutUpload(r.Context(), user, r.PathValue("id"), body, r.ContentLength)
	// A body not read to its end keeps its read deadline (the piece's, or
	// the server's for a body chatd did not start reading): net/http
	// reads up to 256 KiB of what is left before it answers, and would
	// wait for them for as long as a client trickled them; past the
	// deadline it closes the connection after the answer instead. The
	// next request on a connection gets the server's own deadlines.
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

// downloadAttachment serves an attachment or its thumbnail to a member:
// the bytes (local disk) with Range, ETag and conditional requests, or a
// redirect to a short-lived URL of the object store.
func downloadAttachment(thumbnail bool) func(a *API, w http.ResponseWriter, r *http.Request, user int64) error {
	return func(a *API, w http.ResponseWriter, r *http.Request, user int64) error {
		d, err := a.svc.OpenAttachment(r.Context(), user, r.PathValue("id"), thumbnail)
		if err != nil {
			return err
		}
		h := w.Header()
		if d.Redirect != "" {
			// Signed for this request only: nothing may keep it.
			h.Set("Cache-Control", "no-store")
			http.Redirect(w, r, d.Redirect, http.StatusFound)
			return nil
		}
		defer d.Content.Close()
		h.Set("Content-Type", d.ContentType)
		h.Set("Content-Disposition", d.Disposition)
		h.Set("ETag", d.ETag)
		h.Set("X-Content-Type-Options", "nosniff")
		// Whatever a file holds, a browser opening it runs nothing, and
		// no page frames it.
		h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; media-src 'self'; sandbox; frame-ancestors 'none'")
		// A member's browser may keep it but must ask again (ETag: a
		// 304) so a recall or a left group takes effect.
		h.Set("Cache-Control", "private, no-cache")
		rewrite := func(code int, h http.Header) (ErrorDetail, bool) {
			if code == http.StatusRequestedRangeNotSatisfiable && h.Get("Content-Range") == "" {
				// net/http says the size only for a range past the end,
				// not for one that does not parse; a 416 always says it
				// (RFC 9110, 15.5.17).
				h.Set("Content-Range", "bytes */"+strconv.FormatInt(d.Size, 10))
			}
			return conditionalError(code, h)
		}
		if rg := r.Header.Get("Range"); rg != "" {
			unit, set, _ := strings.Cut(rg, "=")
			switch {
			case !strings.EqualFold(strings.TrimSpace(unit), "bytes"):
				// A unit chatd does not know: the header is ignored and
				// the whole file served (RFC 9110, 14.2), not refused.
				r = r.Clone(r.Context())
				r.Header.Del("Range")
			case unit != "bytes":
				// Range units are case-insensitive (RFC 9110, 14.1);
				// net/http knows "bytes" in lower case only.
				r = r.Clone(r.Context())
				r.Header.Set("Range", "bytes="+set)
			}
		}
		http.ServeContent(&jsonErrorWriter{ResponseWriter: w, rewrite: rewrite}, r, "", d.ModTime, d.Content)
		return nil
	}
}
