// Package webpushtest is the receiving side of Web Push for tests: a
// subscriber's keys, RFC 8291 (aes128gcm) decryption, and a loopback push
// endpoint that checks every request's VAPID JWT (RFC 8292), decrypts its
// payload and records it, answering with a scripted status. It stands in
// for a browser vendor's push service; nothing here is used by chatd.
//
// An Endpoint is safe for concurrent use; its handler runs on the HTTP
// server's goroutines and Close stops them.
package webpushtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/internal/authparam"
)

// Subscriber is a user agent's Web Push key pair and auth secret.
type Subscriber struct {
	Private *ecdh.PrivateKey
	Auth    []byte
}

// NewSubscriber makes fresh subscription keys.
func NewSubscriber() *Subscriber {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &Subscriber{Private: k, Auth: auth}
}

// P256dh is the subscription's public key as PushSubscription.toJSON has it.
func (s *Subscriber) P256dh() string {
	return base64.RawURLEncoding.EncodeToString(s.Private.PublicKey().Bytes())
}

// AuthB64 is the auth secret as PushSubscription.toJSON has it.
func (s *Subscriber) AuthB64() string { return base64.RawURLEncoding.EncodeToString(s.Auth) }

// Decrypt opens an aes128gcm body (RFC 8188 framing, RFC 8291 keys) with
// the user agent's private key and auth secret and returns the plaintext
// without padding. Only single-record bodies (what Web Push sends) are
// accepted.
func Decrypt(body []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("body shorter than the aes128gcm header")
	}
	salt := body[:16]
	rs := binary.BigEndian.Uint32(body[16:20])
	idlen := int(body[20])
	if len(body) < 21+idlen || idlen != 65 {
		return nil, fmt.Errorf("keyid is %d bytes, want the 65-byte sender key", idlen)
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, fmt.Errorf("sender key: %w", err)
	}
	ct := body[21+idlen:]
	if uint32(len(ct)) > rs {
		return nil, errors.New("more than one record")
	}
	secret, err := ua.ECDH(asPub)
	if err != nil {
		return nil, err
	}
	keyInfo := append(append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(keyInfo), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	pt, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	// The last non-zero octet is the delimiter: 2 for the last record.
	i := len(pt) - 1
	for i >= 0 && pt[i] == 0 {
		i--
	}
	if i < 0 || pt[i] != 2 {
		return nil, errors.New("no last-record delimiter")
	}
	return pt[:i], nil
}

// VerifyVAPID checks an "Authorization: vapid t=<jwt>, k=<key>" header:
// k is wantKey (base64url, "" accepts any), the JWT is ES256-signed by it,
// its aud is origin and it has not expired. It returns the JWT's sub.
func VerifyVAPID(header, wantKey, origin string) (string, error) {
	rest, ok := strings.CutPrefix(header, "vapid ")
	if !ok {
		return "", errors.New("authorization scheme is not vapid")
	}
	params := authparam.Parse(rest)
	tok, key := params["t"], params["k"]
	if wantKey != "" && key != wantKey {
		return "", fmt.Errorf("k is %q, want the server's key %q", key, wantKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil || len(raw) != 65 {
		return "", errors.New("k is not an uncompressed P-256 key")
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return "", fmt.Errorf("k: %w", err)
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience(origin), jwt.WithExpirationRequired()); err != nil {
		return "", fmt.Errorf("VAPID JWT: %w", err)
	}
	sub, _ := claims["sub"].(string)
	if !strings.HasPrefix(sub, "mailto:") && !strings.HasPrefix(sub, "https:") {
		return "", fmt.Errorf("VAPID sub %q is not a mailto: or https: URL", sub)
	}
	return sub, nil
}

// Push is one request an Endpoint received.
type Push struct {
	Path      string // which subscription (Endpoint.URL's path)
	Plaintext []byte // decrypted payload ("" when Err is set)
	Header    http.Header
	Status    int // what the endpoint answered
	Err       error
	At        time.Time
}

// Receipt is an accepted push as GET /receipts lists it.
type Receipt struct {
	Path       string `json:"path"`
	Plaintext  string `json:"plaintext"`
	AtUnixNano int64  `json:"at"`
}

// Endpoint is a loopback push service for any number of subscriptions,
// one per path.
type Endpoint struct {
	Server   *httptest.Server
	VAPIDKey string // the server key requests must carry ("" accepts any)

	// Default decrypts for paths without a subscription of their own
	// (benchmarks with many devices sharing one key pair).
	Default *Subscriber

	mu     sync.Mutex
	subs   map[string]*Subscriber
	script map[string][]int // statuses to answer per path, in turn; then 201
	hang   map[string]bool
	pushes []Push
	notify chan struct{}
	stop   chan struct{}
}

// NewEndpoint starts an endpoint; Close it when done.
func NewEndpoint(vapidKey string) *Endpoint {
	e := &Endpoint{VAPIDKey: vapidKey, subs: map[string]*Subscriber{}, script: map[string][]int{},
		hang: map[string]bool{}, notify: make(chan struct{}, 1), stop: make(chan struct{})}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	return e
}

// Close stops the server, ending hanging requests first.
func (e *Endpoint) Close() {
	close(e.stop)
	e.Server.CloseClientConnections()
	e.Server.Close()
}

// Subscribe returns the URL of a new subscription and its keys.
func (e *Endpoint) Subscribe(name string) (string, *Subscriber) {
	s := NewSubscriber()
	e.Add(name, s)
	return e.Server.URL + "/push/" + name, s
}

// Add registers a subscription's keys for path /push/<name>.
func (e *Endpoint) Add(name string, s *Subscriber) {
	e.mu.Lock()
	e.subs["/push/"+name] = s
	e.mu.Unlock()
}

// Script makes the next requests to subscription name answer these
// statuses (then 201).
func (e *Endpoint) Script(name string, statuses ...int) {
	e.mu.Lock()
	e.script["/push/"+name] = append(e.script["/push/"+name], statuses...)
	e.mu.Unlock()
}

// Hang makes requests to subscription name never answer until Close (or
// Hang(name, false)).
func (e *Endpoint) Hang(name string, on bool) {
	e.mu.Lock()
	e.hang["/push/"+name] = on
	e.mu.Unlock()
}

// Pushes returns what was received so far.
func (e *Endpoint) Pushes() []Push {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Push(nil), e.pushes...)
}

// Of returns the accepted (2xx, decrypted) pushes to subscription name.
func (e *Endpoint) Of(name string) []Push {
	var out []Push
	for _, p := range e.Pushes() {
		if p.Path == "/push/"+name && p.Err == nil && p.Status/100 == 2 {
			out = append(out, p)
		}
	}
	return out
}

// Held returns what a push service holding subscription name's pushes
// for a device that stayed offline delivers when it comes back: the
// accepted pushes in order, where one with a Topic replaced the held one
// of the same Topic (RFC 8030 section 5.4).
func (e *Endpoint) Held(name string) []Push {
	var out []Push
	for _, p := range e.Of(name) {
		if t := p.Header.Get("Topic"); t != "" {
			out = slices.DeleteFunc(out, func(q Push) bool { return q.Header.Get("Topic") == t })
		}
		out = append(out, p)
	}
	return out
}

// Notify is signalled after every request.
func (e *Endpoint) Notify() <-chan struct{} { return e.notify }

func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/receipts" && r.Method == http.MethodGet {
		// Every accepted push with its arrival time, for a benchmark in
		// another process.
		out := []Receipt{}
		for _, p := range e.Pushes() {
			if p.Err == nil && p.Status/100 == 2 {
				out = append(out, Receipt{Path: p.Path, Plaintext: string(p.Plaintext), AtUnixNano: p.At.UnixNano()})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/log/"); ok && r.Method == http.MethodGet {
		// The accepted payloads of one subscription, for a test in
		// another process (the browser tests' Node script).
		out := []string{}
		for _, p := range e.Of(name) {
			out = append(out, string(p.Plaintext))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8192))
	p := Push{Path: r.URL.Path, Header: r.Header.Clone(), At: time.Now()}
	e.mu.Lock()
	sub := e.subs[r.URL.Path]
	if sub == nil && strings.HasPrefix(r.URL.Path, "/push/") {
		sub = e.Default
	}
	hang := e.hang[r.URL.Path]
	status := http.StatusCreated
	if s := e.script[r.URL.Path]; len(s) > 0 {
		status, e.script[r.URL.Path] = s[0], s[1:]
	}
	e.mu.Unlock()
	switch {
	case sub == nil:
		p.Err, status = errors.New("unknown subscription"), http.StatusNotFound
	case r.Header.Get("Content-Encoding") != "aes128gcm":
		p.Err, status = fmt.Errorf("Content-Encoding %q", r.Header.Get("Content-Encoding")), http.StatusBadRequest
	case r.Header.Get("TTL") == "":
		p.Err, status = errors.New("no TTL header (RFC 8030 requires one)"), http.StatusBadRequest
	}
	if p.Err == nil {
		if _, err := VerifyVAPID(r.Header.Get("Authorization"), e.VAPIDKey, e.Server.URL); err != nil {
			p.Err, status = err, http.StatusUnauthorized
		} else if p.Plaintext, err = Decrypt(body, sub.Private, sub.Auth); err != nil {
			p.Err, status = err, http.StatusBadRequest
		}
	}
	if hang {
		e.mu.Lock()
		e.pushes = append(e.pushes, p) // Status 0: never answered
		e.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-e.stop:
		}
		return
	}
	if status == http.StatusTooManyRequests || status >= 500 {
		w.Header().Set("Retry-After", "1")
	}
	p.Status = status
	e.mu.Lock()
	e.pushes = append(e.pushes, p)
	e.mu.Unlock()
	w.WriteHeader(status)
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// SubscriberFromBytes rebuilds a Subscriber from its private key and auth
// secret (to share one between processes).
func SubscriberFromBytes(private, auth []byte) (*Subscriber, error) {
	k, err := ecdh.P256().NewPrivateKey(private)
	if err != nil {
		return nil, err
	}
	return &Subscriber{Private: k, Auth: auth}, nil
}
