package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/chatd/chatd/internal/auth"
)

//go:embed static
var staticFS embed.FS

// Options configure Register.
type Options struct {
	// Dev enables POST /dev/token and the page's dev sign-in.
	Dev bool
	// Secret is the HS256 secret dev tokens are signed with; used only
	// when Dev is true.
	Secret []byte
	// Logger may be nil (slog.Default()).
	Logger *slog.Logger
	// ConnectSrc are more origins the page may fetch from: where an
	// object store's presigned URLs point when attachments live there
	// (at Amazon S3 the bucket's host, e.g.
	// https://files.s3.dualstack.eu-west-1.amazonaws.com).
	ConnectSrc []string
}

// DevTokenTTL is how long a token from POST /dev/token is valid.
const DevTokenTTL = 24 * time.Hour

// ContentSecurityPolicy is sent with every response of the web client. No
// inline script or style is allowed. connect-src admits the page's own
// origin only: the API and the MQTT WebSocket at /mqtt, which the page
// always opens on its own host and port ('self' covers its ws: and wss:
// in CSP Level 3: Chromium since 70, Firefox, Safari since WebKit bug
// 235873 was fixed in 2022).
// Naming the ws: and wss: schemes instead let a script injected into the
// page send what it reads to any WebSocket host. Attachments are fetched
// with the bearer token and shown from blob: URLs (img-src, media-src);
// img-src also admits https: for the avatars people set as https URLs
// (an image host then sees who looks at it, with no referrer: the
// trade-off until avatars are attachments served from here).
const ContentSecurityPolicy = "default-src 'self'; connect-src 'self'; img-src 'self' data: blob: https:; " +
	"media-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// PermissionsPolicy turns off, for the page and whatever it frames, the
// powerful features it never uses, so that a script injected into it
// cannot ask the user for them in chatd's name (files are picked or
// pasted, never captured). Notifications and push are not features of
// this header; the page asks for them itself.
const PermissionsPolicy = "camera=(), microphone=(), geolocation=(), display-capture=(), payment=(), usb=(), serial=(), hid=(), midi=()"

// csp is ContentSecurityPolicy with more origins the page may connect to
// (an object store the browser uploads to and downloads from).
func csp(connect []string) string {
	if len(connect) == 0 {
		return ContentSecurityPolicy
	}
	return strings.Replace(ContentSecurityPolicy, "connect-src 'self'", "connect-src 'self' "+strings.Join(connect, " "), 1)
}

// devMarker is the attribute in index.html that Register flips in dev mode.
const devMarker = `data-dev="false"`

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Register mounts the web client on mux: the static files under "/" and,
// in dev mode, POST /dev/token. "/" is registered without a method so that
// it does not conflict with the API's method-less prefixes (/v1/, /mqtt);
// the handler checks the method itself.
func Register(mux *http.ServeMux, opts Options) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	assets, err := loadAssets(opts.Dev)
	if err != nil {
		// The files are compiled in: failing here is a build defect that
		// every test run catches, not a runtime condition.
		panic("web: " + err.Error())
	}
	policy := csp(opts.ConnectSrc)
	mux.Handle("/", secure(policy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveAsset(w, r, assets)
	})))
	if opts.Dev {
		mux.Handle("POST /dev/token", secure(policy, devToken(opts.Secret, log)))
	}
}

// loadAssets reads every embedded file once and precomputes its ETag.
func loadAssets(dev bool) (map[string]asset, error) {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	out := map[string]asset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		if p == "index.html" {
			if !bytes.Contains(b, []byte(devMarker)) {
				return errors.New("index.html lacks " + devMarker)
			}
			if dev {
				b = bytes.Replace(b, []byte(devMarker), []byte(`data-dev="true"`), 1)
			}
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		sum := sha256.Sum256(b)
		out["/"+p] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := out["/index.html"]; !ok {
		return nil, errors.New("static/index.html is missing")
	}
	out["/"] = out["/index.html"]
	return out, nil
}

func serveAsset(w http.ResponseWriter, r *http.Request, assets map[string]asset) {
	a, ok := assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	// Revalidate every time: the ETag makes that a 304, and a restarted
	// chatd with a new build is picked up on the next load.
	h.Set("Cache-Control", "no-cache")
	// ServeContent answers If-None-Match, Range and HEAD.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// secure adds the headers every web client response carries.
func secure(policy string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY") // for browsers without frame-ancestors
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Permissions-Policy", PermissionsPolicy)
		// A page of another site that opened this one (window.open) gets
		// no handle on it, with which it could later send the signed-in
		// tab to a look-alike sign-in page of its own.
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// devTokenRequest is the body of POST /dev/token.
type devTokenRequest struct {
	UserID int64 `json:"userId"`
}

// devToken mints a token for any user: development mode only.
func devToken(secret []byte, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if !addressedLocally(r.Host) {
			writeJSONError(w, http.StatusForbidden, "forbidden",
				"the dev sign-in answers requests to localhost or an IP address only: open the page at http://127.0.0.1:<port>/")
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				writeJSONError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "send application/json")
				return
			}
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, 1024))
		dec.DisallowUnknownFields()
		var req devTokenRequest
		if err := dec.Decode(&req); err != nil || dec.More() || req.UserID <= 0 {
			writeJSONError(w, http.StatusBadRequest, "invalid", `the body must be {"userId": <positive integer>}`)
			return
		}
		tok, err := auth.Mint(secret, req.UserID, DevTokenTTL)
		if err != nil {
			log.Error("dev token not minted", "user", req.UserID, "err", err)
			writeJSONError(w, http.StatusInternalServerError, "internal", "internal error")
			return
		}
		// The token itself is never logged.
		log.Info("dev token minted", "user", req.UserID)
		writeJSON(w, http.StatusOK, map[string]string{"token": tok})
	})
}

// addressedLocally says a request's Host is an IP address or a localhost
// name. A page of another name that its owner points at this address
// (DNS rebinding) is same-origin with it, so it could otherwise mint a
// token for anyone from the browser of whoever runs a dev chatd; an IP
// address or localhost cannot be such a page's name.
func addressedLocally(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONError answers in the HTTP API's error shape so the page handles
// both the same way.
func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": strings.TrimSpace(msg)}})
}
