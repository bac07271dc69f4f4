package push

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/segmentio/kafka-go"
)

// SignatureHeader carries the webhook's signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
const SignatureHeader = "X-Chat-Signature"

// webPushTTL is how long a push service keeps an undelivered Web Push: a
// chat wake-up older than a day is noise (the app syncs when opened).
const webPushTTL = 24 * 60 * 60

// outputs are the ways a push leaves chatd.
type outputs struct {
	cfg        Config
	hookClient *http.Client
	log        *slog.Logger
	kafka      *kafka.Writer // nil: no Kafka hand-off
	// transport is kafka's own: close closes its connections, which
	// Writer.Close leaves open (with a metadata refresh polling the
	// brokers) for as long as the process lives.
	transport *kafka.Transport

	ensureMu sync.Mutex
	ensured  bool // the topic was found or created (Config.EnsureKafkaTopic)
}

func newOutputs(cfg Config, webhook *http.Client, log *slog.Logger) *outputs {
	o := &outputs{cfg: cfg, hookClient: webhook, log: log}
	if len(cfg.KafkaBrokers) > 0 && cfg.KafkaTopic != "" {
		o.transport = &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "chatd-push-" + cfg.NodeID}
		o.kafka = &kafka.Writer{
			Addr:     kafka.TCP(cfg.KafkaBrokers...),
			Topic:    cfg.KafkaTopic,
			Balancer: &kafka.Hash{}, // one user's requests stay in order on one partition
			// Retries are the push job's, with backoff and jitter.
			MaxAttempts:  1,
			BatchTimeout: 2 * time.Millisecond,
			ReadTimeout:  cfg.Timeout,
			WriteTimeout: cfg.Timeout,
			RequiredAcks: kafka.RequireAll,
			// A missing topic is Config.EnsureKafkaTopic's to create.
			AllowAutoTopicCreation: false,
			Transport:              o.transport,
		}
	}
	return o
}

func (o *outputs) close() {
	if o.kafka != nil {
		_ = o.kafka.Close()
		o.transport.CloseIdleConnections()
	}
}

// deliver sends n to one device and classifies the answer; after is the
// push service's Retry-After, if it gave one; kafkaOK that the Kafka topic
// has it (now, or from an earlier attempt of j); cut that ctx was
// cancelled before any answer came (a retry that was no attempt: an
// answer received is one, also when ctx ended right after it). out is
// set once a request of it went out: an HTTP request written (whole or
// not: the service may have read it), or a Kafka write attempted. A send
// ctx cut before that reached nobody.
func (o *outputs) deliver(ctx context.Context, j *job, d device, n Notification, out *atomic.Bool) (res outcome, after time.Duration, kafkaOK, cut bool) {
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { out.Store(true) }})
	if isWebPush(d.Platform) {
		res, after, cut = o.webPush(ctx, j, d, n)
		return res, after, false, cut
	}
	req := Request{
		ID:           strconv.FormatInt(j.id, 10) + "-" + strconv.FormatInt(d.ID, 10),
		UserID:       j.user,
		Device:       DeviceRef{ID: d.ID, Platform: d.Platform, Token: d.Address, AppID: d.AppID, Locale: d.Locale},
		Tag:          notificationTag(j.conv),
		CollapseKey:  pushKey(j),
		Notification: n,
		CreatedAt:    time.Now().UTC(),
	}
	body, err := json.Marshal(req)
	if err != nil {
		return sentFailed, 0, false, false
	}
	res = sentFailed
	if o.kafka == nil && o.cfg.WebhookURL == "" {
		o.log.Warn("push: no FCM/APNs hand-off configured; dropping the push", "platform", d.Platform)
		return sentFailed, 0, false, false
	}
	// With the webhook too, a device Kafka took the push for in an
	// earlier attempt, which the webhook asked to retry, gets it from the
	// webhook alone: Kafka's consumer gets each push once.
	kafkaOK = o.kafka != nil && slices.Contains(j.kafkaSent, d.ID)
	if kafkaOK {
		res = sentOK
	} else if o.kafka != nil {
		wctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
		if err := o.ensureTopic(wctx); err != nil {
			cancel()
			o.log.Debug("push: could not ensure the Kafka topic", "err", err)
			return sentRetry, 0, false, ctx.Err() != nil
		}
		out.Store(true)
		err := o.kafka.WriteMessages(wctx, kafka.Message{
			Key:   []byte(strconv.FormatInt(j.user, 10)),
			Value: body,
			Headers: []kafka.Header{
				{Key: "type", Value: []byte("push")},
				{Key: "platform", Value: []byte(d.Platform)},
				{Key: "notification", Value: []byte(n.Type)},
			},
		})
		cancel()
		if err != nil {
			o.log.Debug("push: Kafka hand-off failed", "err", err)
			return sentRetry, 0, false, ctx.Err() != nil
		}
		res, kafkaOK = sentOK, true
	}
	if o.cfg.WebhookURL != "" {
		handedOff := res == sentOK
		res, after, cut = o.webhook(ctx, body)
		if handedOff && res == sentFailed {
			// Kafka's consumer has the push, which may reach the device,
			// though the webhook refused it.
			res = sentFailedHandedOff
		}
	}
	return res, after, kafkaOK, cut
}

// ensureTopic runs Config.EnsureKafkaTopic until it succeeds once.
func (o *outputs) ensureTopic(ctx context.Context) error {
	if o.cfg.EnsureKafkaTopic == nil {
		return nil
	}
	o.ensureMu.Lock()
	defer o.ensureMu.Unlock()
	if o.ensured {
		return nil
	}
	if err := o.cfg.EnsureKafkaTopic(ctx); err != nil {
		return err
	}
	o.ensured = true
	return nil
}

// webhook POSTs a signed request to the operator's sender; cut: ctx
// ended before it answered.
func (o *outputs) webhook(ctx context.Context, body []byte) (res outcome, after time.Duration, cut bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return sentFailed, 0, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign([]byte(o.cfg.WebhookSecret), time.Now(), body))
	resp, err := o.hookClient.Do(req)
	if err != nil {
		o.log.Debug("push: webhook failed", "err", err)
		return sentRetry, 0, ctx.Err() != nil
	}
	status := resp.StatusCode
	res, after = classify(resp)
	if res == sentGone && status != http.StatusGone {
		// The sender says a token is dead with 410 alone: a 404 is the
		// webhook's own URL not found (a wrong path, a proxy without the
		// route), which must not delete every FCM and APNs device.
		o.log.Warn("push: the webhook answered 404: is push_webhook_url right?")
		return sentFailed, 0, false
	}
	return res, after, false
}

// Sign returns the X-Chat-Signature value of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// ErrBadSignature is Verify's answer to a forged, stale or malformed
// signature.
var ErrBadSignature = errors.New("bad X-Chat-Signature")

// Verify checks a webhook request's X-Chat-Signature against body: the
// HMAC must match and the timestamp lie within tolerance of now (replay
// safety together with de-duplication by Request.ID).
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrBadSignature
	}
	want := Sign(secret, time.Unix(sec, 0), body)
	if !hmac.Equal([]byte(want[strings.Index(want, "v1=")+3:]), []byte(sig)) {
		return ErrBadSignature
	}
	return nil
}

// webPush encrypts n for the subscription (RFC 8291 aes128gcm) and POSTs
// it with a VAPID JWT (RFC 8292) to the endpoint (RFC 8030); cut: ctx
// ended before the push service answered.
func (o *outputs) webPush(ctx context.Context, j *job, d device, n Notification) (res outcome, after time.Duration, cut bool) {
	sub := &webpush.Subscription{Endpoint: d.Address, Keys: webpush.Keys{P256dh: d.P256dh, Auth: d.Auth}}
	resp, err := webpush.SendNotificationWithContext(ctx, n.encode(), sub, &webpush.Options{
		HTTPClient: o.cfg.HTTPClient,
		// webpush-go prefixes "mailto:" itself unless the subject is https.
		Subscriber:      strings.TrimPrefix(o.cfg.VAPIDSubject, "mailto:"),
		VAPIDPublicKey:  o.cfg.VAPID.Public,
		VAPIDPrivateKey: o.cfg.VAPID.Private,
		Topic:           pushKey(j),
		TTL:             webPushTTL,
		Urgency:         webpush.UrgencyHigh,
	})
	if err != nil {
		if errors.Is(err, errPrivateAddress) {
			o.log.Debug("push: endpoint on a private address refused", "device", d.ID)
			return sentFailed, 0, false
		}
		if ctx.Err() != nil || isNetErr(err) {
			return sentRetry, 0, ctx.Err() != nil
		}
		o.log.Debug("push: Web Push request could not be built", "err", err)
		return sentFailed, 0, false
	}
	res, after = classify(resp)
	return res, after, false
}

// notificationTag names conversation conv's notification on a device
// (the web client's tag too): within Apple's 64 bytes for apns-collapse-id.
func notificationTag(conv int64) string { return "conv-" + strconv.FormatInt(conv, 10) }

// pushKey is j's collapse key (Web Push Topic, apns-collapse-id, FCM
// collapse_key): an undelivered push a push service holds for an offline
// device is replaced by a newer one with the same key. A notification
// and a remove take their conversation's tag: a newer notification
// stands for the older one's messages too, and a remove takes the one it
// replaces off the screen anyway. An update has none: in a held
// notification's place it would leave the device nothing to show, and
// the message's arrival unknown; without one the device gets both, and
// the update changes the notification it names, or nothing.
func pushKey(j *job) string {
	if j.update {
		return ""
	}
	return notificationTag(j.conv)
}

// isNetErr tells a failed request (retry) from one that could not be
// built (a bad subscription: retrying cannot help).
func isNetErr(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

// classify maps a push service's (or the webhook's) answer to an outcome:
// 2xx sent; 404 and 410 the subscription or token is gone for good; 429
// and 5xx retry, after Retry-After when given; anything else fails this
// push only.
func classify(resp *http.Response) (outcome, time.Duration) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return sentOK, 0
	case c == http.StatusNotFound || c == http.StatusGone:
		return sentGone, 0
	case c == http.StatusTooManyRequests || c >= 500:
		return sentRetry, retryAfter(resp.Header.Get("Retry-After"), time.Now())
	default:
		return sentFailed, 0
	}
}

// maxRetryAfter caps a push service's Retry-After.
const maxRetryAfter = time.Hour

// retryAfter parses Retry-After: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	// Seconds are compared before they are multiplied: beyond the cap
	// they would overflow a Duration (or an int64) into "no wait".
	if s, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		d = time.Duration(min(max(s, 0), int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// errPrivateAddress refuses a Web Push connection to a non-public address.
var errPrivateAddress = errors.New("push endpoint is not on a public address (push_allow_http allows it)")

// newHTTPClient returns a client with timeout that follows no redirects (a
// push service answers; it does not send chatd elsewhere); publicOnly
// refuses connections to loopback, private, link-local and other
// non-public addresses (publicAddr), checked on the address actually
// dialled, so a DNS name pointing inside the network is refused too.
// Through a proxy (HTTPS_PROXY, HTTP_PROXY; NO_PROXY), which is the
// operator's and may well be on a private address, the endpoint's
// addresses are checked instead, as chatd resolves its name: the proxy
// resolves it again, so a proxy that also refuses private destinations
// keeps a name that changes its answer in between out too.
func newHTTPClient(timeout time.Duration, publicOnly bool) *http.Client {
	return newHTTPClientVia(timeout, publicOnly, http.ProxyFromEnvironment)
}

func newHTTPClientVia(timeout time.Duration, publicOnly bool, proxy func(*http.Request) (*url.URL, error)) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	dial := dialer.DialContext
	if publicOnly {
		guarded := *dialer
		guarded.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil || !publicAddr(ip) {
				return errPrivateAddress
			}
			return nil
		}
		var (
			mu      sync.Mutex
			proxies = map[string]bool{} // host:port of the proxies requests went through
		)
		next := proxy
		proxy = func(req *http.Request) (*url.URL, error) {
			u, err := next(req)
			if err != nil || u == nil {
				return u, err
			}
			if err := checkPublicHost(req.Context(), req.URL.Hostname()); err != nil {
				return nil, err
			}
			mu.Lock()
			proxies[proxyAddr(u)] = true
			mu.Unlock()
			return u, nil
		}
		dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			toProxy := proxies[address]
			mu.Unlock()
			if toProxy {
				return dialer.DialContext(ctx, network, address)
			}
			return guarded.DialContext(ctx, network, address)
		}
	}
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:               proxy,
			DialContext:         dial,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: timeout,
			ForceAttemptHTTP2:   true,
		},
	}
}

// proxyAddr is the host:port the transport dials for proxy u.
func proxyAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// checkPublicHost is errPrivateAddress unless every address of host (a
// literal, or a name chatd resolves) is public.
func checkPublicHost(ctx context.Context, host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if !publicAddr(ip) {
			return errPrivateAddress
		}
		return nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if !publicAddr(ip) {
			return errPrivateAddress
		}
	}
	return nil
}

// notPublic4 are the IPv4 ranges of the IANA IPv4 Special-Purpose Address
// Registry that are not globally reachable (and multicast, broadcast).
var notPublic4 = prefixes("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4")

// public4 are the globally reachable exceptions inside them (192.0.0.9
// PCP anycast, 192.0.0.10 TURN anycast).
var public4 = prefixes("192.0.0.9/32", "192.0.0.10/32")

// IPv6: only global unicast (2000::/3) is public, less the ranges of the
// IANA IPv6 Special-Purpose Address Registry in it that are not globally
// reachable or lead to IPv4 (2001::/23 IETF protocol assignments with
// Teredo and benchmarking, documentation, 6to4); NAT64's well-known
// prefix is as public as the IPv4 address it carries.
var (
	global6    = netip.MustParsePrefix("2000::/3")
	notPublic6 = prefixes("2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func inAny(ip netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// publicAddr is whether a Web Push endpoint may be at ip.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.Is4() {
		return !inAny(ip, notPublic4) || inAny(ip, public4)
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return publicAddr(netip.AddrFrom4([4]byte(b[12:])))
	}
	return global6.Contains(ip) && !inAny(ip, notPublic6)
}
