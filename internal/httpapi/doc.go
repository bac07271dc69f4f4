// Package httpapi is chatd's HTTP JSON API and the RPC dispatcher behind the
// MQTT v5 request/response path (chat/v1/rpc/{method}). Both reach the same
// operations: each one is a single function from decoded parameters to
// (status, value, error), called by an HTTP binder (path, query, body) and by
// the RPC decoder (one JSON object), so the two transports cannot disagree on
// validation, authorisation, idempotency or error codes. Every operation goes
// through chat.Service.
//
// Contract:
//
//   - Routes are data (routes.go, exposed by Routes) and live only under
//     /v1/, /healthz and /readyz, so chatd can mount Handler beside /mqtt and
//     static files. docs/openapi.yaml describes exactly these routes; a test
//     fails when the two differ.
//   - /v1/ requires "Authorization: Bearer <jwt>"; without a valid token the
//     answer is 401 with code "unauthorized" and a WWW-Authenticate header,
//     before any input is looked at.
//   - Errors are {"error":{"code":...,"message":...}}. The code is a chat.Code
//     (status by ErrorStatus) or one of the transport codes "unauthorized"
//     (401), "method_not_allowed" (405) and "unsupported_media_type" (415).
//     Internal errors are logged and answered with a fixed message; causes
//     never reach the client.
//   - Input is strict: bodies are bounded (413 above the limit), must be a
//     single JSON object with known fields only, Content-Type must be JSON
//     when given (415 otherwise), path ids are positive int64s and query
//     parameters are known, single and non-negative integers (400 otherwise).
//   - Each route honours an Idempotency-Key header, needs none (a repeat
//     does nothing more), or refuses one (400: no key makes its repeat
//     safe): Route.Key, which docs/openapi.yaml's Idempotency-Key
//     parameters follow (a test fails when they differ).
//   - Every answer, error or success, says Cache-Control no-store (private,
//     no-cache with an ETag), X-Content-Type-Options nosniff,
//     X-Frame-Options DENY and Content-Security-Policy "default-src 'none';
//     frame-ancestors 'none'" (an attachment's bytes a sandboxing policy of
//     their own, which refuses framing too): no answer is a page another
//     site may frame or a browser may read as another type.
//   - RPC replies carry the HTTP response body of the same operation plus a
//     "status" field holding the HTTP status it would have had; failures
//     are {"status":n,"error":{...}}. An unknown method is not_found (404).
//   - Requests are logged at debug level with method, route pattern, status,
//     duration and user id; never with bodies or tokens.
//
// API is safe for concurrent use.
package httpapi
