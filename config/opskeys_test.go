package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOpsCombinationsNameTheKeyTheSourceAndTheFix(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
		{"tls without a TLS listener", map[string]string{"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem"},
			[]string{"tls_cert (from env CHAT_TLS_CERT)", "no TLS listener", "set mqtts_addr"}},
		{"mqtts without a certificate", map[string]string{"CHAT_MQTTS_ADDR": "0.0.0.0:8883"},
			[]string{"mqtts_addr (from env CHAT_MQTTS_ADDR)", "set tls_cert and tls_key"}},
		{"https without a certificate", map[string]string{"CHAT_HTTPS_ADDR": "0.0.0.0:8443"},
			[]string{"https_addr (from env CHAT_HTTPS_ADDR)", "tls_cert"}},
		{"client CA without mqtts", map[string]string{"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem",
			"CHAT_HTTPS_ADDR": ":8443", "CHAT_MQTTS_CLIENT_CA": "/ca.pem"}, []string{"mqtts_client_ca", "set mqtts_addr"}},
		{"a CRL without a CA", map[string]string{"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem",
			"CHAT_MQTTS_ADDR": ":8883", "CHAT_MQTTS_CLIENT_CRL": "/crl.pem"},
			[]string{"mqtts_client_crl (from env CHAT_MQTTS_CLIENT_CRL)", "set mqtts_client_ca (CHAT_MQTTS_CLIENT_CA)"}},
		{"require without a CA", map[string]string{"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem",
			"CHAT_MQTTS_ADDR": ":8883", "CHAT_MQTTS_CLIENT_AUTH": "require"}, []string{"mqtts_client_auth", "set mqtts_client_ca"}},
		{"proxy protocol trusting nobody", map[string]string{"CHAT_PROXY_PROTOCOL": "true"},
			[]string{"proxy_protocol_trusted (from env CHAT_PROXY_PROTOCOL)", "10.0.0.0/8"}},
		{"trusted networks with proxy protocol off", map[string]string{"CHAT_PROXY_PROTOCOL_TRUSTED": "10.0.0.0/8"},
			[]string{"proxy_protocol (from env CHAT_PROXY_PROTOCOL_TRUSTED)", "proxy_protocol: true"}},
		{"a network with host bits", map[string]string{"CHAT_PROXY_PROTOCOL": "true", "CHAT_PROXY_PROTOCOL_TRUSTED": "10.1.2.3/8"},
			[]string{"proxy_protocol_trusted", "did you mean 10.0.0.0/8"}},
		{"issuer without a provider key", map[string]string{"CHAT_JWT_ISSUER": "https://idp"},
			[]string{"jwt_issuer (from env CHAT_JWT_ISSUER)", "set jwks_url or jwt_public_key"}},
		{"user claim without a provider key", map[string]string{"CHAT_JWT_USER_CLAIM": "uid"},
			[]string{"jwt_user_claim", "set jwks_url"}},
		{"jwks without an audience or an issuer", map[string]string{"CHAT_JWKS_URL": "https://idp.example/certs"},
			[]string{"jwks_url (from env CHAT_JWKS_URL)", "jwks_url needs jwt_audience or jwt_issuer", "any other application", "set jwt_audience"}},
		{"jwks not a URL", map[string]string{"CHAT_JWKS_URL": "idp.example/certs"}, []string{"jwks_url", "https://"}},
		{"metrics on the http port", map[string]string{"CHAT_METRICS_ADDR": "127.0.0.1:8080"},
			[]string{"metrics_addr", "the address of http_addr too", "port of its own"}},
		// [::] takes the port on every address, IPv4 ones too (dual stack).
		{"metrics on the IPv6 wildcard of the http port", map[string]string{"CHAT_METRICS_ADDR": "[::]:8080"},
			[]string{"metrics_addr", "the address of http_addr too", "port of its own"}},
		{"https on the IPv4 wildcard of an IPv6 wildcard's port", map[string]string{"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem",
			"CHAT_MQTT_ADDR": "[::]:8443", "CHAT_HTTPS_ADDR": "0.0.0.0:8443"},
			[]string{"https_addr", "the address of mqtt_addr too", "port of its own"}},
	}, nil)
}

func TestListenersCanBeTurnedOff(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{"CHAT_MQTT_ADDR": "off", "CHAT_HTTP_ADDR": "OFF",
		"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem", "CHAT_MQTTS_ADDR": "0.0.0.0:8883", "CHAT_HTTPS_ADDR": "0.0.0.0:8443"})
	if s.MQTTAddr != "" || s.HTTPAddr != "" || s.MQTTSAddr != "0.0.0.0:8883" || s.HTTPSAddr != "0.0.0.0:8443" {
		t.Fatalf("listeners: %q %q %q %q", s.MQTTAddr, s.HTTPAddr, s.MQTTSAddr, s.HTTPSAddr)
	}
}

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"-version", "--version"} {
		if _, err := Load([]string{arg}, nil); !errors.Is(err, ErrVersion) {
			t.Errorf("%s: %v, want ErrVersion", arg, err)
		}
	}
}

// TestAnAllowedOriginWithItsSchemesDefaultPortIsTheOriginBrowsersSend:
// a browser's Origin header leaves the scheme's default port out
// ("https://app.example.com", never "https://app.example.com:443"), and
// the WebSocket listeners compare it as a string with ws_allowed_origins,
// whose form Load promises to be the browser's. An origin written with
// its default port was kept as written, so it never matched and that
// site's WebSockets were refused.
func TestAnAllowedOriginWithItsSchemesDefaultPortIsTheOriginBrowsersSend(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{"CHAT_WS_ALLOWED_ORIGINS": "https://App.Example.com:443, http://localhost:80/,http://localhost:3000,https://[::1]:443,http://example.com:443"})
	want := []string{"https://app.example.com", "http://localhost", "http://localhost:3000", "https://[::1]", "http://example.com:443"}
	if !slices.Equal(s.WSAllowedOrigins, want) {
		t.Errorf("ws_allowed_origins = %q, want %q", s.WSAllowedOrigins, want)
	}
}

// TestAKeySetWithAnAudienceOrAnIssuerAloneLoads: either one tells chatd's
// tokens from those the key set's owner signed for other applications
// (Firebase's issuer names the project).
func TestAKeySetWithAnAudienceOrAnIssuerAloneLoads(t *testing.T) {
	for _, env := range []map[string]string{
		{"CHAT_JWKS_URL": "https://idp.example/certs", "CHAT_JWT_AUDIENCE": "chatd"},
		{"CHAT_JWKS_URL": "https://idp.example/certs", "CHAT_JWT_ISSUER": "https://securetoken.google.com/chat-project"},
	} {
		if s := mustLoad(t, nil, env); s.JWKSURL == "" {
			t.Errorf("%v: jwks_url not set", env)
		}
	}
}

// The plain listeners were not compared with each other: mqtt_addr and
// http_addr on one port loaded, and chatd started PostgreSQL and migrated
// before the second listen failed with "address already in use", which
// named neither setting and exited 1, so a supervisor restarted it every
// 2 s for ever. The setting that moved onto the other's port is named.
func TestThePlainListenersMayNotShareAPort(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
		{"mqtt on the http port", map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:8080"},
			[]string{"mqtt_addr (from env CHAT_MQTT_ADDR)", "mqtt_addr is 127.0.0.1:8080, the address of http_addr too", "port of its own"}},
		{"http on the wildcard of the mqtt port", map[string]string{"CHAT_HTTP_ADDR": "0.0.0.0:1883"},
			[]string{"http_addr (from env CHAT_HTTP_ADDR)", "the address of mqtt_addr too", "port of its own"}},
	}, nil)
	// Port 0 picks a free port each time: never a clash.
	mustLoad(t, nil, map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "127.0.0.1:0"})
}

// TestAListenerClashIsSeenWhateverTheLoopbackIsCalled: localhost is
// loopback (Go listens on 127.0.0.1 for it, ::1 where the hosts file
// has only that; Load looks no name up, so it takes either), and an
// IPv4-mapped IPv6 address is its IPv4 one, so either on another
// listener's port is a clash, as the same text is; the hosts' text was
// compared, and the second listen failed once PostgreSQL ran.
func TestAListenerClashIsSeenWhateverTheLoopbackIsCalled(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
		{"localhost and 127.0.0.1", map[string]string{"CHAT_HTTP_ADDR": "localhost:1883"},
			[]string{"http_addr (from env CHAT_HTTP_ADDR)", "http_addr is localhost:1883, the address of mqtt_addr too"}},
		{"LOCALHOST. and 127.0.0.1", map[string]string{"CHAT_METRICS_ADDR": "LOCALHOST.:8080"},
			[]string{"metrics_addr is LOCALHOST.:8080, the address of http_addr too"}},
		{"localhost and ::1", map[string]string{"CHAT_MQTT_ADDR": "[::1]:7000", "CHAT_HTTP_ADDR": "localhost:7000"},
			[]string{"the address of mqtt_addr too"}},
		{"IPv4-mapped and IPv4", map[string]string{"CHAT_HTTP_ADDR": "[::ffff:127.0.0.1]:1883"},
			[]string{"the address of mqtt_addr too"}},
		{"wildcard port and loopback", map[string]string{"CHAT_METRICS_ADDR": ":8080"},
			[]string{"metrics_addr is :8080, the address of http_addr too"}},
	}, nil)
	// Two loopback addresses are two addresses.
	mustLoad(t, nil, map[string]string{"CHAT_MQTT_ADDR": "127.0.0.2:8080"})
}

// TestHSTSMaxAgeIsOffByDefaultAndNeedsHTTPS: hsts_max_age is 0 (no
// header) unless set, whole seconds when set, and refused without
// https_addr, whose answers alone would carry it.
func TestHSTSMaxAgeIsOffByDefaultAndNeedsHTTPS(t *testing.T) {
	if s := mustLoad(t, nil, nil); s.HSTSMaxAge != 0 {
		t.Errorf("default hsts_max_age %v, want 0", s.HSTSMaxAge)
	}
	tlsEnv := map[string]string{"CHAT_TLS_CERT": "/c.pem", "CHAT_TLS_KEY": "/k.pem", "CHAT_HTTPS_ADDR": ":8443", "CHAT_HSTS_MAX_AGE": "1.5s"}
	if s := mustLoad(t, nil, tlsEnv); s.HSTSMaxAge != time.Second {
		t.Errorf("hsts_max_age 1.5s read as %v, want 1s", s.HSTSMaxAge)
	}
	checkLoadErrors(t, []loadErrorCase{
		{"without https", map[string]string{"CHAT_HSTS_MAX_AGE": "24h"},
			[]string{"hsts_max_age (from env CHAT_HSTS_MAX_AGE)", "https_addr is not set"}},
		{"below a second", map[string]string{"CHAT_HSTS_MAX_AGE": "500ms"}, []string{"hsts_max_age", "is below 1s"}},
		{"negative", map[string]string{"CHAT_HSTS_MAX_AGE": "-1h"}, []string{"hsts_max_age", "must be positive"}},
	}, nil)
}

// TestAMetricsTokenThatCannotBeSentOrIsShortIsRefusedWithoutShowingIt:
// metrics_token is what the Authorization header carries after "Bearer ",
// so a value it could not carry (a space, a quote) or one short enough to
// guess stops chatd naming the setting, never echoing the value; a good
// one loads and is logged only as set.
func TestAMetricsTokenThatCannotBeSentOrIsShortIsRefusedWithoutShowingIt(t *testing.T) {
	for _, bad := range []string{"has a space in it 0123456789", `quote"0123456789abcdef`, "shortsecret", "ünïcode-0123456789abcdef", "pad=ding0123456789abcdef"} {
		_, err := Load(nil, env(map[string]string{"CHAT_METRICS_TOKEN": bad}))
		wantLoadError(t, err, []string{"metrics_token (from env CHAT_METRICS_TOKEN)", "not shown: secret", "openssl rand -hex 32"})
		if err != nil && strings.Contains(err.Error(), bad) {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	for _, good := range []string{"0123456789abcdef", "aGVsbG8gd29ybGQgaGVsbG8=", "a-b.c_d~e+f/g0123456789=="} {
		s := mustLoad(t, nil, map[string]string{"CHAT_METRICS_TOKEN": good})
		if s.MetricsToken != good {
			t.Errorf("metrics_token %q loaded as %q", good, s.MetricsToken)
		}
		if r := s.Redacted()["metrics_token"]; r != "[redacted]" {
			t.Errorf("metrics_token is logged as %v", r)
		}
		if lv := s.LogValue().String(); strings.Contains(lv, good) {
			t.Errorf("LogValue shows the token: %s", lv)
		}
	}
	if s := mustLoad(t, nil, map[string]string{"CHAT_METRICS_TOKEN": ""}); s.MetricsToken != "" || s.Redacted()["metrics_token"] != "" {
		t.Errorf("an empty metrics_token is %q, logged as %v", s.MetricsToken, s.Redacted()["metrics_token"])
	}
}
