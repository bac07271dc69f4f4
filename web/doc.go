// Package web serves chatd's browser client: a single page, embedded in the
// binary, that chats over MQTT-over-WebSocket (/mqtt on the same origin) and
// the HTTP API (/v1).
//
// Contract of Register:
//   - GET and HEAD of "/" and of every file under static/ answer that file,
//     with a strong ETag (SHA-256 of the content) and Cache-Control no-cache,
//     so a browser revalidates and picks up a new chatd at once. Any other
//     path is 404; another method on an existing file is 405.
//   - Every response carries Content-Security-Policy
//     "default-src 'self'; connect-src 'self'; frame-ancestors 'none'"
//     (plus base-uri, form-action and object-src restrictions; connect-src
//     also names Options.ConnectSrc, the object store's origin): the page
//     reaches its own origin, whose ws: or wss: /mqtt 'self' covers, and
//     no other WebSocket host,
//     X-Content-Type-Options nosniff, X-Frame-Options DENY,
//     Referrer-Policy no-referrer, Permissions-Policy turning off the
//     powerful features the page never uses (camera, microphone,
//     geolocation...) and Cross-Origin-Opener-Policy
//     same-origin (a cross-site page that opened it keeps no handle on
//     it). Strict-Transport-Security is the server's to add, on HTTPS
//     answers only (hsts_max_age). The page has no inline script and builds
//     its DOM with textContent only, so user text can never become markup.
//   - POST /dev/token {"userId":n} answers {"token":"<HS256 JWT>"} valid for
//     24 hours, signed with Options.Secret, only when Options.Dev is true:
//     it lets anyone become anyone, which is what a local demo needs and
//     nothing else may have. Without Dev the route does not exist (404), and
//     the page shows only the "paste a token" sign-in. With Dev it answers
//     requests addressed by IP or to localhost only (403 otherwise): a page
//     of another name pointed at the developer's machine (DNS rebinding)
//     would be same-origin with it.
//   - The page learns whether dev mode is on from a data-dev attribute that
//     Register writes into index.html once, at start-up.
//
// The static files are built from web/src by web/build.sh (esbuild bundles
// mqtt.js and the app into static/app.js, and the service worker into
// static/sw.js); the built files are committed, so
// building chatd needs no Node.js. The page's behaviour (reconnects, a
// new client id when another user's session holds the tab's, gap
// filling with afterSeq, unread badges, receipts, escaping, replies,
// forwards, edits, recalls and reactions) is tested in a real Chromium by
// browser_test.go.
package web
