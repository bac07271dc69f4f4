package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/attach"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

// tokenBuckets is a chat.RateLimiter of plain counters: a bucket per
// kind and key starts full and is never refilled, so what a test sees
// left is what was charged.
type tokenBuckets struct {
	mu   sync.Mutex
	left map[string]int
}

func (b *tokenBuckets) Take(_ context.Context, kind chat.RateKind, key string, l chat.RateLimit) chat.RateDecision {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := string(kind) + ":" + key
	if _, ok := b.left[k]; !ok {
		b.left[k] = l.Burst
	}
	if b.left[k] == 0 {
		return chat.RateDecision{Limit: l.Burst, RetryAfter: time.Hour, Reset: time.Hour}
	}
	b.left[k]--
	return chat.RateDecision{Allowed: true, Limit: l.Burst, Remaining: b.left[k]}
}

func (b *tokenBuckets) Refund(_ context.Context, kind chat.RateKind, key string, l chat.RateLimit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := string(kind) + ":" + key
	b.left[k] = min(b.left[k]+1, l.Burst)
}

// uploadKeyEnv is an API with attachments, a day's quota of quota bytes
// and a burst of one upload ticket per user, never refilled.
func uploadKeyEnv(t *testing.T, quota int64) *env {
	e := newEnv(t)
	e.withAttachmentsConfig(attach.Config{QuotaBytesPerDay: quota})
	e.svc.Limiter = &tokenBuckets{left: map[string]int{}}
	e.svc.Rates.Upload = chat.RateLimit{Rate: 1e-9, Burst: 1}
	return e
}

// TestARetriedUploadTicketWithTheSameKeyIsOneUploadChargedOnce: a ticket
// request whose answer was lost, sent again with its Idempotency-Key
// (HTTP) or clientMsgId (RPC), answers 200 with the first upload's ticket
// (the same upload id, URL and expiry), makes no second upload and
// charges neither the day's bytes nor the upload rate again: with a
// burst of one ticket, the retries are not refused. The ticket so
// answered takes the bytes; asked again after that, it is still the same
// upload. Another user's same key is their own upload.
func TestARetriedUploadTicketWithTheSameKeyIsOneUploadChargedOnce(t *testing.T) {
	const size = 300
	e := uploadKeyEnv(t, 10*size)
	g := e.group(owner, member)
	key := newID()
	body := map[string]any{"conversationId": g, "name": "notes.txt", "contentType": "text/plain", "size": size}
	ask := func(user int64, key string) resp {
		return e.do(user, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key))
	}
	first := ask(owner, key)
	if first.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", first.status, first.body)
	}
	var tk chat.UploadTicket
	first.decode(t, &tk)
	again := ask(owner, key)
	if again.status != http.StatusOK || string(again.body) != string(first.body) {
		t.Fatalf("retried ticket: %d %s, want 200 %s", again.status, again.body, first.body)
	}
	rr := e.rpc(owner, "upload.create", pathf(`{"conversationId":%d,"name":"notes.txt","contentType":"text/plain","size":%d,"clientMsgId":%q}`,
		g, size, strings.ToUpper(key)))
	if rr.status != http.StatusOK {
		t.Fatalf("retried ticket over RPC: %s, want 200", rr.raw)
	}
	var viaRPC chat.UploadTicket
	decodeInto(t, rr.raw, &viaRPC)
	if viaRPC.UploadID != tk.UploadID || viaRPC.URL != tk.URL || !viaRPC.ExpiresAt.Equal(tk.ExpiresAt) {
		t.Fatalf("retried ticket over RPC: %+v, want %+v", viaRPC, tk)
	}
	uploads := func() int64 {
		return queryInt(t, e.pool, `SELECT count(*) FROM attachment WHERE uploader_id = $1`, owner)
	}
	if n := uploads(); n != 1 {
		t.Fatalf("%d uploads after a ticket asked three times with one key, want 1", n)
	}
	if b := queryInt(t, e.pool, `SELECT COALESCE(sum(bytes), 0) FROM upload_quota WHERE user_id = $1`, owner); b != size {
		t.Fatalf("the day's bytes charged: %d, want %d (once)", b, size)
	}
	// The one token was taken by the first request: a new key is refused.
	if r := ask(owner, newID()); r.status != http.StatusTooManyRequests {
		t.Fatalf("a second upload with a burst of one: %d %s, want 429", r.status, r.body)
	}

	put := e.do(owner, "PUT", tk.URL, strings.Repeat("x", size), withHeader("Content-Type", "text/plain"))
	if put.status != http.StatusOK {
		t.Fatalf("PUT to the ticket: %d %s", put.status, put.body)
	}
	if r := ask(owner, key); r.status != http.StatusOK || string(r.body) != string(first.body) {
		t.Fatalf("ticket asked again once the upload is complete: %d %s, want 200 %s", r.status, r.body, first.body)
	}
	if n := uploads(); n != 1 {
		t.Fatalf("%d uploads, want 1", n)
	}

	theirs := ask(member, key)
	var other chat.UploadTicket
	theirs.decode(t, &other)
	if theirs.status != http.StatusCreated || other.UploadID == tk.UploadID {
		t.Fatalf("another user's same key: %d %s, want 201 with an upload of theirs", theirs.status, theirs.body)
	}
}

// TestAnUploadKeyReusedForOtherBytesIsAConflict: a key that asked for one
// upload, asked for another size, type, name or purpose, is 409 conflict
// naming the upload it made, and nothing is made or charged. The key in
// the HTTP body is refused (it goes in the header), as is one that is not
// a UUID.
func TestAnUploadKeyReusedForOtherBytesIsAConflict(t *testing.T) {
	e := uploadKeyEnv(t, 10_000)
	g := e.group(owner, member)
	key := newID()
	ticket := map[string]any{"conversationId": g, "name": "a.txt", "contentType": "text/plain", "size": 100}
	first := e.do(owner, "POST", "/v1/uploads", ticket, withHeader("Idempotency-Key", key))
	if first.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", first.status, first.body)
	}
	var tk chat.UploadTicket
	first.decode(t, &tk)
	for what, body := range map[string]map[string]any{
		"size":    {"conversationId": g, "name": "a.txt", "contentType": "text/plain", "size": 101},
		"type":    {"conversationId": g, "name": "a.txt", "contentType": "text/csv", "size": 100},
		"name":    {"conversationId": g, "name": "b.txt", "contentType": "text/plain", "size": 100},
		"purpose": {"purpose": "avatar", "name": "a.png", "contentType": "image/png", "size": 100},
	} {
		r := e.do(owner, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key))
		if r.status != http.StatusConflict || r.errorCode() != "conflict" || !strings.Contains(string(r.body), tk.UploadID) {
			t.Errorf("the key asked for another %s: %d %s, want 409 conflict naming %s", what, r.status, r.body, tk.UploadID)
		}
	}
	if rr := e.rpc(owner, "upload.create", pathf(`{"conversationId":%d,"name":"a.txt","contentType":"text/plain","size":7,"clientMsgId":%q}`, g, key)); rr.status != http.StatusConflict {
		t.Errorf("the key asked for another size over RPC: %s, want 409", rr.raw)
	}
	if n := queryInt(t, e.pool, `SELECT count(*) FROM attachment`); n != 1 {
		t.Errorf("%d uploads, want 1", n)
	}
	if b := queryInt(t, e.pool, `SELECT COALESCE(sum(bytes), 0) FROM upload_quota`); b != 100 {
		t.Errorf("the day's bytes charged: %d, want 100", b)
	}
	inBody := map[string]any{"conversationId": g, "name": "a.txt", "contentType": "text/plain", "size": 100, "clientMsgId": key}
	if r := e.do(owner, "POST", "/v1/uploads", inBody); r.status != http.StatusBadRequest {
		t.Errorf("key in the body: %d %s, want 400", r.status, r.body)
	}
	if r := e.do(owner, "POST", "/v1/uploads", ticket, withHeader("Idempotency-Key", "not-a-uuid")); r.status != http.StatusBadRequest {
		t.Errorf("a key that is not a UUID: %d %s, want 400", r.status, r.body)
	}
}

// TestAnUploadKeyWhoseURLExpiredIsGoneAndOnceDroppedMakesANewUpload: the
// key of an upload whose URL expired is spent (410 gone: the ticket could
// not be used); once the cleanup dropped the upload, its key went with
// it, in the same statement, and asks for a new upload.
func TestAnUploadKeyWhoseURLExpiredIsGoneAndOnceDroppedMakesANewUpload(t *testing.T) {
	e := uploadKeyEnv(t, 0)
	e.svc.Rates.Upload = chat.RateLimit{}
	g := e.group(owner)
	key := newID()
	body := map[string]any{"conversationId": g, "name": "a.txt", "contentType": "text/plain", "size": 10}
	ask := func() resp { return e.do(owner, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key)) }
	var tk chat.UploadTicket
	if r := ask(); r.status != http.StatusCreated {
		t.Fatalf("ticket: %d %s", r.status, r.body)
	} else {
		r.decode(t, &tk)
	}
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE attachment SET url_expires_at = now() - interval '1 second', created_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if r := ask(); r.status != http.StatusGone {
		t.Fatalf("the key of an expired URL: %d %s, want 410", r.status, r.body)
	}
	if n, err := store.NewAttachments(e.pool).ExpireUploads(ctx, time.Now().Add(-24*time.Hour), 0, 10); err != nil || n != 1 {
		t.Fatalf("expire uploads: %d, %v", n, err)
	}
	if n := queryInt(t, e.pool, `SELECT count(*) FROM upload_create`); n != 0 {
		t.Fatalf("%d keys left after their upload was dropped", n)
	}
	r := ask()
	var again chat.UploadTicket
	r.decode(t, &again)
	if r.status != http.StatusCreated || again.UploadID == tk.UploadID {
		t.Fatalf("the key of a dropped upload: %d %s, want 201 with a new upload", r.status, r.body)
	}
}

func queryInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	return pgtest.QueryOne[int64](t, pool, sql, args...)
}

// TestAnUploadKeyWhoseURLExpiredIsGoneWhateverBecameOfItsUpload: once the
// ticket's URL expired, the key is spent, 410 gone, also when the upload
// changed since: a group's avatar (its conversation set) or an avatar
// replaced (released, its name cleared), as the store leaves them; not
// 409 conflict, which would say the key asked for another file.
func TestAnUploadKeyWhoseURLExpiredIsGoneWhateverBecameOfItsUpload(t *testing.T) {
	e := uploadKeyEnv(t, 0)
	e.svc.Rates.Upload = chat.RateLimit{}
	g := e.group(owner)
	body := map[string]any{"purpose": "avatar", "name": "me.png", "contentType": "image/png", "size": 10}
	args := func(sql string) []any {
		if strings.Contains(sql, "$2") {
			return []any{g}
		}
		return nil
	}
	for what, became := range map[string]string{
		"a group's avatar":  `state = 'avatar', conversation_id = $2`,
		"a replaced avatar": `state = 'released', name = ''`,
		"a complete upload": `state = 'complete'`,
	} {
		key := newID()
		r := e.do(owner, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key))
		if r.status != http.StatusCreated {
			t.Fatalf("ticket: %d %s", r.status, r.body)
		}
		var tk chat.UploadTicket
		r.decode(t, &tk)
		if _, err := e.pool.Exec(context.Background(), `UPDATE attachment SET size = 10, url_expires_at = now() - interval '1 second', `+became+`
			WHERE id = $1`, append([]any{tk.UploadID}, args(became)...)...); err != nil {
			t.Fatal(err)
		}
		if r := e.do(owner, "POST", "/v1/uploads", body, withHeader("Idempotency-Key", key)); r.status != http.StatusGone {
			t.Errorf("the key of an expired URL, its upload %s since: %d %s, want 410", what, r.status, r.body)
		}
	}
}
