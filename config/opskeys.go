package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

// OpsSettings are the settings of the TLS listeners, the identity provider,
// the PROXY protocol and the metrics listener (part of Settings).
type OpsSettings struct {
	MQTTSAddr string // mqtts_addr: MQTT over TLS listener, "" = none
	HTTPSAddr string // https_addr: HTTPS (API, web client, wss) listener, "" = none
	// HSTSMaxAge (hsts_max_age) is the max-age of the
	// Strict-Transport-Security header of https_addr's answers, whole
	// seconds; 0 sends none.
	HSTSMaxAge time.Duration

	// MQTTSClientCA is a PEM bundle of the CAs whose client certificates
	// the MQTT TLS listener accepts; "" asks for none.
	MQTTSClientCA string
	// MQTTSClientCRL is a file of the client CAs' revocation lists
	// (PEM or DER); "" revokes no certificate by serial.
	MQTTSClientCRL string
	// MQTTSClientAuth is "optional" (a certificate, if given, must verify
	// and then names the user; without one the JWT does) or "require".
	MQTTSClientAuth string

	ProxyProtocol bool // proxy_protocol: accept PROXY v1/v2 headers on the MQTT listeners
	// ProxyTrusted are the networks allowed to send one.
	ProxyTrusted []netip.Prefix
	// ForwardedTrusted (forwarded_trusted) are the HTTP proxies whose
	// X-Forwarded-For is believed for MQTT over WebSocket.
	ForwardedTrusted []netip.Prefix

	MetricsAddr string // metrics_addr: own listener for /metrics; "" = on http_addr
	// MetricsToken (metrics_token) is the bearer token every /metrics
	// request must carry, on whichever listener; "" asks for none.
	MetricsToken string

	JWKSURL     string        // jwks_url: identity provider key set
	JWKSRefresh time.Duration // jwks_refresh_interval
	JWTIssuer   string        // jwt_issuer: required iss of provider tokens
	// JWTAudience: provider tokens must name one of these in aud.
	JWTAudience  []string
	JWTUserClaim string // jwt_user_claim: claim holding the user id (sub)
}

// Off is the value that turns a listener with a default address off.
const Off = "off"

// parseListenAddr is parseAddr, or "off" (also "") for no listener.
func parseListenAddr(v string) (string, error) {
	if t := strings.TrimSpace(v); t == "" || strings.EqualFold(t, Off) {
		return "", nil
	}
	return parseAddr(v)
}

// parseHSTSMaxAge reads hsts_max_age: 0 for none, else a duration of
// whole seconds (the header's unit), at least one.
func parseHSTSMaxAge(v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "0" {
		return 0, nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < time.Second {
		return 0, errors.New("is below 1s")
	}
	return d.Truncate(time.Second), nil
}

// MinMetricsTokenBytes is the shortest accepted metrics_token: the token
// is all that keeps a public node's metrics from anyone who asks, so it
// must not be a word one could guess.
const MinMetricsTokenBytes = 16

// metricsTokenRE is RFC 6750's b64token, what the Authorization header
// carries after "Bearer ": a token with another character (a space, a
// quote, a non-ASCII letter) could not be sent as it is.
var metricsTokenRE = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

// parseMetricsToken reads metrics_token: "" for none, else a b64token of
// at least MinMetricsTokenBytes. Its errors never show the value.
func parseMetricsToken(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case !metricsTokenRE.MatchString(v):
		return "", errors.New("has a character a bearer token cannot carry (only A-Z a-z 0-9 - . _ ~ + / and trailing =)")
	case len(v) < MinMetricsTokenBytes:
		return "", fmt.Errorf("is %d characters, shorter than %d", len(v), MinMetricsTokenBytes)
	}
	return v, nil
}

func readablePath(v string) (string, error) {
	if strings.ContainsAny(v, "\n\r\x00") {
		return "", errors.New("is not a file path")
	}
	return v, nil
}

// opsKeys follow the core keys in documentation order.
var opsKeys = []*key{
	mk("mqtts_addr", "", `MQTT over TLS listen address (conventionally port 8883); "" = none; needs tls_cert and tls_key`,
		"use host:port such as 0.0.0.0:8883, or leave it empty",
		func(s *Settings, v string) (err error) { s.MQTTSAddr, err = parseListenAddr(v); return }),
	mk("https_addr", "", `HTTPS listen address: API, web client and MQTT over secure WebSocket (wss); "" = none; needs tls_cert and tls_key`,
		"use host:port such as 0.0.0.0:8443, or leave it empty",
		func(s *Settings, v string) (err error) { s.HTTPSAddr, err = parseListenAddr(v); return }),
	mk("hsts_max_age", "0", `Strict-Transport-Security max-age of https_addr's answers (never of http_addr's), e.g. 8760h; browsers then reach the host, every port of it, over HTTPS only, for that long; 0 = none`,
		"use 0 for none or a Go duration of at least 1s such as 24h or 8760h (a year)",
		func(s *Settings, v string) (err error) { s.HSTSMaxAge, err = parseHSTSMaxAge(v); return }),
	mk("mqtts_client_ca", "", `PEM file of the CAs that sign device client certificates (mTLS on mqtts_addr); reloaded when the file changes or on SIGHUP, a removed CA's connections end; "" = no client certificates`,
		"give the path of a PEM file with one or more CA certificates, or leave it empty",
		func(s *Settings, v string) (err error) { s.MQTTSClientCA, err = readablePath(v); return }),
	mk("mqtts_client_crl", "", `CRLs of the mqtts_client_ca CAs (PEM "X509 CRL" blocks or one DER list, as openssl ca -gencrl writes): certificates they list are refused; reloaded when the file changes or on SIGHUP; "" = none`,
		"give the path of the CRL file your CA publishes, or leave it empty",
		func(s *Settings, v string) (err error) { s.MQTTSClientCRL, err = readablePath(v); return }),
	mk("mqtts_client_auth", "optional", "with mqtts_client_ca: optional (a client certificate, if sent, names the user; else the JWT does) or require",
		"use optional or require",
		func(s *Settings, v string) (err error) {
			s.MQTTSClientAuth, err = parseEnum(v, "optional", "require")
			return
		}),
	switchKey("proxy_protocol", "false", "accept PROXY protocol v1/v2 headers on the MQTT listeners from proxy_protocol_trusted",
		func(s *Settings) *bool { return &s.ProxyProtocol }),
	listKey(mk("proxy_protocol_trusted", "", "comma-separated networks (CIDR) or addresses of the load balancers allowed to send a PROXY header",
		"use CIDRs or IP addresses such as 10.0.0.0/8,192.168.1.10",
		func(s *Settings, v string) (err error) { s.ProxyTrusted, err = parsePrefixes(v); return })),
	listKey(mk("forwarded_trusted", "", "comma-separated networks (CIDR) or addresses of the HTTP proxies whose X-Forwarded-For names the client of an MQTT-over-WebSocket connection",
		"use CIDRs or IP addresses such as 10.0.0.0/8,192.168.1.10",
		func(s *Settings, v string) (err error) { s.ForwardedTrusted, err = parsePrefixes(v); return })),
	mk("metrics_addr", "", `own listen address for GET /metrics (and /healthz, /readyz); "" serves /metrics on http_addr`,
		"use host:port such as 127.0.0.1:9090 or 0.0.0.0:9100, or leave it empty",
		func(s *Settings, v string) (err error) { s.MetricsAddr, err = parseListenAddr(v); return }),
	secretKey(mk("metrics_token", "", `bearer token GET /metrics requires (Authorization: Bearer <token>) on every listener serving it; /healthz and /readyz stay open; "" = none`,
		fmt.Sprintf("use at least %d of the characters A-Z a-z 0-9 - . _ ~ + / (and = at the end), e.g. the output of `openssl rand -hex 32`, or leave it empty", MinMetricsTokenBytes),
		func(s *Settings, v string) (err error) { s.MetricsToken, err = parseMetricsToken(v); return })),
	urlKey("jwks_url", `identity provider's JWKS URL (keys by kid; RS256, ES256, EdDSA tokens); needs jwt_audience or jwt_issuer; "" = none`,
		"use the provider's https:// key set URL, e.g. https://idp.example/realms/chat/protocol/openid-connect/certs",
		"an https:// URL", func(s *Settings) *string { return &s.JWKSURL }, "https", "http"),
	mk("jwks_refresh_interval", "15m", "how often the JWKS is fetched again, at least 1s (an unknown kid fetches it at once, at most every 30s)",
		"use a Go duration of at least 1s such as 15m or 1h",
		func(s *Settings, v string) (err error) {
			// Each refresh is a request to the provider: a few milliseconds
			// would flood it (and a typo of 15ms for 15m would not show).
			d, err := parseDuration(v)
			if err == nil && d < time.Second {
				return errors.New("is below 1s")
			}
			s.JWKSRefresh = d
			return err
		}),
	mk("jwt_issuer", "", `required iss of identity provider tokens; "" = not checked`,
		"use the provider's issuer exactly as it appears in its tokens, e.g. https://idp.example/realms/chat",
		func(s *Settings, v string) error { s.JWTIssuer = strings.TrimSpace(v); return nil }),
	listKey(mk("jwt_audience", "", `comma-separated audiences; identity provider tokens must name one in aud; "" = not checked`,
		"use the client id or API identifier the provider puts in aud, e.g. chatd",
		func(s *Settings, v string) error { s.JWTAudience = splitList(v); return nil })),
	mk("jwt_user_claim", "sub", "claim of identity provider tokens that holds the chat user id (a positive integer)",
		"use the name of a claim holding the numeric user id, e.g. sub or https://chat.example/uid",
		func(s *Settings, v string) error {
			v = strings.TrimSpace(v)
			if v == "" {
				return errors.New("is empty")
			}
			s.JWTUserClaim = v
			return nil
		}),
}

// checkOps validates combinations of the ops keys.
func (s *Settings) checkOps() error {
	tls := s.TLSCert != ""
	switch {
	case tls && s.MQTTSAddr == "" && s.HTTPSAddr == "":
		return &Error{Key: "tls_cert", Source: s.Source("tls_cert"),
			Reason: "tls_cert is set but no TLS listener is: TLS is served on mqtts_addr and https_addr, beside the plain mqtt_addr and http_addr",
			Fix:    "set mqtts_addr (e.g. 0.0.0.0:8883) and/or https_addr (e.g. 0.0.0.0:8443); set mqtt_addr and http_addr to off to serve TLS only"}
	case !tls && s.MQTTSAddr != "":
		return &Error{Key: "mqtts_addr", Source: s.Source("mqtts_addr"),
			Reason: "mqtts_addr is set but tls_cert and tls_key are not",
			Fix:    "set tls_cert and tls_key (CHAT_TLS_CERT, CHAT_TLS_KEY) to PEM files, or unset mqtts_addr"}
	case !tls && s.HTTPSAddr != "":
		return &Error{Key: "https_addr", Source: s.Source("https_addr"),
			Reason: "https_addr is set but tls_cert and tls_key are not",
			Fix:    "set tls_cert and tls_key (CHAT_TLS_CERT, CHAT_TLS_KEY) to PEM files, or unset https_addr"}
	}
	if s.HSTSMaxAge > 0 && s.HTTPSAddr == "" {
		return &Error{Key: "hsts_max_age", Source: s.Source("hsts_max_age"),
			Reason: "Strict-Transport-Security is sent only on https_addr's answers, and https_addr is not set",
			Fix:    "set https_addr (e.g. 0.0.0.0:8443), or hsts_max_age to 0; a proxy in front that terminates TLS sends the header itself"}
	}
	if s.MQTTSClientCA != "" && s.MQTTSAddr == "" {
		return &Error{Key: "mqtts_client_ca", Source: s.Source("mqtts_client_ca"),
			Reason: "client certificates are only asked for on mqtts_addr, which is not set",
			Fix:    "set mqtts_addr (e.g. 0.0.0.0:8883) or unset mqtts_client_ca"}
	}
	if s.MQTTSClientCRL != "" && s.MQTTSClientCA == "" {
		return &Error{Key: "mqtts_client_crl", Source: s.Source("mqtts_client_crl"),
			Reason: "a CRL revokes client certificates, which are only asked for with mqtts_client_ca",
			Fix:    "set mqtts_client_ca (CHAT_MQTTS_CLIENT_CA) to a PEM file of the CAs that signed the CRL, or unset mqtts_client_crl"}
	}
	if s.MQTTSClientAuth == "require" && s.MQTTSClientCA == "" {
		return &Error{Key: "mqtts_client_auth", Source: s.Source("mqtts_client_auth"),
			Reason: "require needs mqtts_client_ca, the CAs client certificates are checked against",
			Fix:    "set mqtts_client_ca to a PEM file of CA certificates, or use optional"}
	}
	if s.ProxyProtocol && len(s.ProxyTrusted) == 0 {
		return &Error{Key: "proxy_protocol_trusted", Source: s.Source("proxy_protocol"),
			Reason: "proxy_protocol is on but no network is trusted to send PROXY headers (anyone could claim any address)",
			Fix:    "list your load balancers' networks, e.g. proxy_protocol_trusted: 10.0.0.0/8, or turn proxy_protocol off"}
	}
	if !s.ProxyProtocol && len(s.ProxyTrusted) > 0 {
		return &Error{Key: "proxy_protocol", Source: s.Source("proxy_protocol_trusted"),
			Reason: "proxy_protocol_trusted is set but proxy_protocol is off",
			Fix:    "set proxy_protocol: true (CHAT_PROXY_PROTOCOL=true), or unset proxy_protocol_trusted"}
	}
	if s.JWTPublicKey == "" && s.JWKSURL == "" {
		for _, c := range []struct {
			key string
			set bool
		}{{"jwt_issuer", s.JWTIssuer != ""}, {"jwt_audience", len(s.JWTAudience) > 0}, {"jwt_user_claim", s.JWTUserClaim != "sub"}} {
			if k := c.key; c.set {
				return &Error{Key: k, Source: s.Source(k),
					Reason: k + " applies to identity provider tokens, but no provider key is configured (chatd's own HS256 tokens always use sub, without iss or aud)",
					Fix:    "set jwks_url or jwt_public_key, or unset " + k}
			}
		}
	}
	// A key set is often shared: Google's signs the tokens of every
	// Firebase project, a tenant's IdP those of every application it
	// serves. Without an audience or an issuer to tell chatd's tokens
	// apart, any of them would sign a user in.
	if s.JWKSURL != "" && s.JWTIssuer == "" && len(s.JWTAudience) == 0 {
		return &Error{Key: "jwks_url", Source: s.Source("jwks_url"),
			Reason: "jwks_url needs jwt_audience or jwt_issuer: without either, a token the key set's owner signed for any other application is accepted (shared key sets such as Google's for Firebase sign for every project)",
			Fix:    "set jwt_audience to the client id or API identifier the provider puts in aud, or jwt_issuer to its iss (Firebase: https://securetoken.google.com/<project>), or both"}
	}
	return s.checkListenerPorts()
}

// checkListenerPorts refuses two listeners on one port, naming the one
// that was moved onto the other's (the later of the two in this order,
// unless that one is at its default and the earlier is not): the second
// listen would fail only once PostgreSQL ran, naming no setting.
func (s *Settings) checkListenerPorts() error {
	ls := []struct{ key, addr string }{{"mqtt_addr", s.MQTTAddr}, {"http_addr", s.HTTPAddr},
		{"mqtts_addr", s.MQTTSAddr}, {"https_addr", s.HTTPSAddr}, {"metrics_addr", s.MetricsAddr}}
	for i, a := range ls {
		for _, b := range ls[i+1:] {
			if a.addr == "" || b.addr == "" || !sameAddr(a.addr, b.addr) {
				continue
			}
			if s.Source(b.key) == SourceDefault && s.Source(a.key) != SourceDefault {
				a, b = b, a
			}
			return &Error{Key: b.key, Source: s.Source(b.key),
				Reason: fmt.Sprintf("%s is %s, the address of %s too", b.key, b.addr, a.key),
				Fix:    "give each listener a port of its own"}
		}
	}
	return nil
}

// sameAddr reports whether two listen addresses name the same fixed port
// (port 0 picks a free one each time, so never clashes): a wildcard host
// takes it on every address, and hosts naming one address clash however
// they are spelt.
func sameAddr(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp || ap == "0" {
		return false
	}
	if wildcard(ah) || wildcard(bh) || strings.EqualFold(strings.TrimSuffix(ah, "."), strings.TrimSuffix(bh, ".")) {
		return true
	}
	as, bs := hostAddrs(ah), hostAddrs(bh)
	return slices.ContainsFunc(as, func(x netip.Addr) bool { return slices.Contains(bs, x) })
}

// wildcard reports whether a listen host takes the port on every address:
// "", 0.0.0.0, and :: (on Linux, dual stack: the IPv4 addresses too).
func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// hostAddrs are the addresses a listen host may stand for without a DNS
// lookup (Load reads nothing but its arguments and the file): an IP
// address (IPv4-mapped ones as IPv4) and localhost, which is loopback
// (RFC 6761) of either family as the hosts file says; nil for another
// name.
func hostAddrs(host string) []netip.Addr {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap().WithZone("")}
	}
	return nil
}

// redactedOps adds the ops keys to Redacted's map.
func (s Settings) redactedOps(m map[string]any) {
	m["mqtts_addr"] = s.MQTTSAddr
	m["https_addr"] = s.HTTPSAddr
	m["hsts_max_age"] = s.HSTSMaxAge.String()
	m["mqtts_client_ca"] = s.MQTTSClientCA
	m["mqtts_client_crl"] = s.MQTTSClientCRL
	m["mqtts_client_auth"] = s.MQTTSClientAuth
	m["proxy_protocol"] = s.ProxyProtocol
	m["proxy_protocol_trusted"] = PrefixStrings(s.ProxyTrusted)
	m["forwarded_trusted"] = PrefixStrings(s.ForwardedTrusted)
	m["metrics_addr"] = s.MetricsAddr
	m["metrics_token"] = redactSecret(s.MetricsToken)
	m["jwks_url"] = s.JWKSURL
	m["jwks_refresh_interval"] = s.JWKSRefresh.String()
	m["jwt_issuer"] = s.JWTIssuer
	m["jwt_audience"] = append([]string{}, s.JWTAudience...)
	m["jwt_user_claim"] = s.JWTUserClaim
}

// parsePrefixes reads a comma-separated list of networks (CIDR) and
// addresses (a network of one); a network with host bits set is refused
// rather than silently widened or narrowed.
func parsePrefixes(v string) ([]netip.Prefix, error) {
	list := splitList(v)
	out := make([]netip.Prefix, 0, len(list))
	for _, n := range list {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			a, aerr := netip.ParseAddr(n)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR or IP address", n)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%q has host bits set; did you mean %s?", n, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// PrefixStrings spells networks as the settings take them, for logs and
// the redacted settings.
func PrefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
