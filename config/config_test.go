package config

import (
	"errors"
	"flag"
	chat "github.com/chatd/chatd"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) { return MapEnv(m) }

// loadErrorCase is settings that Load must refuse with a *config.Error
// whose text holds every one of want: the key, where its value came from
// and what to do.
type loadErrorCase struct {
	name string
	env  map[string]string
	want []string // substrings of the error
}

// checkLoadErrors runs each case as a subtest; also, when not nil, checks
// each case's error further.
func checkLoadErrors(t *testing.T, cases []loadErrorCase, also func(t *testing.T, err error)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(nil, env(tc.env))
			wantLoadError(t, err, tc.want)
			if also != nil {
				also(t, err)
			}
		})
	}
}

// wantLoadError checks that err, Load's, is a *config.Error whose text
// holds every one of want.
func wantLoadError(t *testing.T, err error, want []string) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load: %v, want a *config.Error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "chatd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, args []string, e map[string]string) Settings {
	t.Helper()
	s, err := Load(args, env(e))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

func TestDefaults(t *testing.T) {
	s := mustLoad(t, nil, nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"mqtt_addr", s.MQTTAddr, "127.0.0.1:1883"},
		{"http_addr", s.HTTPAddr, "127.0.0.1:8080"},
		{"database_url", s.DatabaseURL, ""},
		{"data_dir", s.DataDir, "./data"},
		{"jwt_secret", s.JWTSecret, ""},
		{"jwt_public_key", s.JWTPublicKey, ""},
		{"kafka_brokers", len(s.KafkaBrokers), 0},
		{"kafka_topic", s.KafkaTopic, "chat.events"},
		{"tls_cert", s.TLSCert, ""},
		{"tls_key", s.TLSKey, ""},
		{"max_body_bytes", s.MaxBodyBytes, 16384},
		{"max_members", s.MaxMembers, 1000},
		{"large_group", s.LargeGroup, 200},
		{"edit_window", s.EditWindow, 48 * time.Hour},
		{"recall_window", s.RecallWindow, 24 * time.Hour},
		{"max_inflight", s.MaxInflight, 64},
		{"db_max_conns", s.DBMaxConns, int32(32)},
		{"send_timeout", s.SendTimeout, 5 * time.Second},
		{"log_level", s.LogLevel, "info"},
		{"log_format", s.LogFormat, "text"},
		{"dev", s.Dev, false},
		{"ws_allowed_origins", len(s.WSAllowedOrigins), 0},
		{"limit_send_rate", s.LimitSendRate, 10.0},
		{"limit_send_burst", s.LimitSendBurst, 30},
		{"limit_conv_rate", s.LimitConvRate, 100.0},
		{"limit_conv_burst", s.LimitConvBurst, 200},
		{"limit_read_rate", s.LimitReadRate, 20.0},
		{"limit_read_burst", s.LimitReadBurst, 100},
		{"limit_typing_rate", s.LimitTypingRate, 5.0},
		{"limit_typing_burst", s.LimitTypingBurst, 20},
		{"limit_api_rate", s.LimitAPIRate, 50.0},
		{"limit_api_burst", s.LimitAPIBurst, 100},
		{"limit_connect_rate", s.LimitConnectRate, 500.0},
		{"limit_connect_burst", s.LimitConnectBurst, 1000},
		{"limit_connect_user_rate", s.LimitConnectUserRate, 1.0},
		{"limit_connect_user_burst", s.LimitConnectUserBurst, 20},
		{"max_connections_per_user", s.MaxConnectionsPerUser, 20},
		{"max_pending_connects_per_ip", s.MaxPendingConnectsPerIP, 256},
		{"max_idle_http_connections_per_ip", s.MaxIdleHTTPConnsPerIP, 256},
		{"connect_budget_rate", s.ConnectBudgetRate, 1000.0},
		{"connect_budget_queue", s.ConnectBudgetQueue, 1000},
		{"redis_url", s.RedisURL, ""},
		{"presence_push", s.PresencePush, true},
		{"presence_grace", s.PresenceGrace, time.Second},
		{"cursor_flush", s.CursorFlush, 5 * time.Second},
		{"delivered_flush", s.DeliveredFlush, 250 * time.Millisecond},
		{"shutdown_timeout", s.ShutdownTimeout, 15 * time.Second},
		{"config_file", s.ConfigFile, ""},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if !strings.HasSuffix(s.NodeID, "-"+strconv.Itoa(os.Getpid())) {
		t.Errorf("default node_id %q is not hostname-pid", s.NodeID)
	}
	if got := s.Source("max_members"); got != "default" {
		t.Errorf("Source(max_members) = %q, want default", got)
	}
	if l := s.Limits(); l.MaxBodyBytes != 16384 || l.MaxMembers != 1000 {
		t.Errorf("Limits() = %+v", l)
	}
}

func TestPrecedence(t *testing.T) {
	path := writeYAML(t, `
mqtt_addr: 127.0.0.1:1000
http_addr: 127.0.0.1:2000
max_members: 10
log_level: debug
kafka_brokers: [k1:9092, k2:9092]
`)
	e := map[string]string{
		"CHAT_CONFIG":      path,
		"CHAT_HTTP_ADDR":   "127.0.0.1:2001", // env beats yaml
		"CHAT_MAX_MEMBERS": "20",             // env beats yaml, flag beats env
		"CHAT_DEV":         "true",
	}
	s := mustLoad(t, []string{"-max-members", "30", "-dev=false"}, e)
	if s.ConfigFile != path {
		t.Errorf("ConfigFile = %q, want %q", s.ConfigFile, path)
	}
	if s.MQTTAddr != "127.0.0.1:1000" {
		t.Errorf("mqtt_addr = %q, want the yaml value", s.MQTTAddr)
	}
	if s.HTTPAddr != "127.0.0.1:2001" {
		t.Errorf("http_addr = %q, want the env value", s.HTTPAddr)
	}
	if s.MaxMembers != 30 {
		t.Errorf("max_members = %d, want the flag value 30", s.MaxMembers)
	}
	if s.Dev {
		t.Errorf("dev = true, want the flag value false")
	}
	if s.LogLevel != "debug" {
		t.Errorf("log_level = %q, want debug from yaml", s.LogLevel)
	}
	if !reflect.DeepEqual(s.KafkaBrokers, []string{"k1:9092", "k2:9092"}) {
		t.Errorf("kafka_brokers = %q", s.KafkaBrokers)
	}
	for key, want := range map[string]string{
		"mqtt_addr":    "yaml " + path + ":2",
		"http_addr":    "env CHAT_HTTP_ADDR",
		"max_members":  "flag -max-members",
		"send_timeout": "default",
	} {
		if got := s.Source(key); got != want {
			t.Errorf("Source(%s) = %q, want %q", key, got, want)
		}
	}

	// -config beats CHAT_CONFIG.
	other := writeYAML(t, "max_members: 11\n")
	s = mustLoad(t, []string{"-config", other}, map[string]string{"CHAT_CONFIG": path})
	if s.MaxMembers != 11 || s.ConfigFile != other {
		t.Errorf("-config did not win over CHAT_CONFIG: max_members=%d file=%q", s.MaxMembers, s.ConfigFile)
	}

	// A bare -dev means true; --double-dash flags work too.
	s = mustLoad(t, []string{"-dev", "--send-timeout", "250ms"}, nil)
	if !s.Dev || s.SendTimeout != 250*time.Millisecond {
		t.Errorf("dev=%v send_timeout=%v", s.Dev, s.SendTimeout)
	}
}

// A variable set to "" used to count as unset, so no variable could undo
// what the YAML file set: turn a listener off, unset a URL or a list. It
// is the empty value now, as "" is in YAML.
func TestAnEmptyVariableOverridesTheYAMLValueWithTheEmptyValue(t *testing.T) {
	path := writeYAML(t, `mqtt_addr: 127.0.0.1:1000
metrics_addr: 127.0.0.1:9100
database_url: postgres://chat@db/chat
redis_url: redis://redis:6379/0
kafka_brokers: [k1:9092]
ws_allowed_origins: https://chat.example
`)
	s := mustLoad(t, nil, map[string]string{"CHAT_CONFIG": path, "CHAT_MQTT_ADDR": "", "CHAT_METRICS_ADDR": "",
		"CHAT_DATABASE_URL": "", "CHAT_REDIS_URL": "", "CHAT_KAFKA_BROKERS": "", "CHAT_WS_ALLOWED_ORIGINS": ""})
	if s.MQTTAddr != "" || s.MetricsAddr != "" || s.DatabaseURL != "" || s.RedisURL != "" || len(s.KafkaBrokers) != 0 || len(s.WSAllowedOrigins) != 0 {
		t.Errorf("empty variables left YAML values: mqtt_addr %q, metrics_addr %q, database_url %q, redis_url %q, kafka_brokers %q, ws_allowed_origins %q",
			s.MQTTAddr, s.MetricsAddr, s.DatabaseURL, s.RedisURL, s.KafkaBrokers, s.WSAllowedOrigins)
	}
	for _, key := range []string{"mqtt_addr", "metrics_addr", "database_url", "redis_url", "kafka_brokers", "ws_allowed_origins"} {
		if want := "env CHAT_" + strings.ToUpper(key); s.Source(key) != want {
			t.Errorf("Source(%s) = %q, want %q", key, s.Source(key), want)
		}
	}
	// Unset, the YAML value stays.
	if s := mustLoad(t, nil, map[string]string{"CHAT_CONFIG": path}); s.MQTTAddr != "127.0.0.1:1000" || s.RedisURL == "" {
		t.Errorf("without the variables: mqtt_addr %q, redis_url %q, want the YAML values", s.MQTTAddr, s.RedisURL)
	}
}

// A setting with no empty value (a number, a duration, a switch) refuses
// an empty variable, naming it and saying to unset it, rather than
// falling back to the YAML value or the default in silence.
func TestAnEmptyVariableForASettingWithoutAnEmptyValueIsRefusedNamingIt(t *testing.T) {
	path := writeYAML(t, "max_members: 50\nshutdown_timeout: 30s\ndev: true\n")
	for _, v := range []string{"CHAT_MAX_MEMBERS", "CHAT_SHUTDOWN_TIMEOUT", "CHAT_DEV"} {
		t.Run(v, func(t *testing.T) {
			_, err := Load(nil, env(map[string]string{"CHAT_CONFIG": path, v: ""}))
			var ce *Error
			if !errors.As(err, &ce) || ce.Source != "env "+v || !strings.Contains(err.Error(), "unset "+v) {
				t.Fatalf("Load with %s set but empty: %v, want a *config.Error from env %s saying to unset it", v, err, v)
			}
		})
	}
}

func TestEveryKeyFromEveryLayer(t *testing.T) {
	// A valid non-default value per key, proving each is wired to all
	// three sources.
	vals := map[string]string{
		"mqtt_addr":                   "0.0.0.0:1884",
		"http_addr":                   ":8081",
		"database_url":                "postgres://u:p@db:5432/chat",
		"data_dir":                    "/var/lib/chatd",
		"jwt_secret":                  strings.Repeat("s", 32),
		"jwt_public_key":              "/etc/chatd/idp.pem",
		"kafka_brokers":               "a:1,b:2",
		"kafka_topic":                 "events",
		"node_id":                     "node-1",
		"tls_cert":                    "/c.pem",
		"tls_key":                     "/k.pem",
		"max_body_bytes":              "100",
		"max_members":                 "50",
		"large_group":                 "5",
		"edit_window":                 "15m",
		"recall_window":               "0",
		"max_inflight":                "8",
		"db_max_conns":                "4",
		"send_timeout":                "2s",
		"log_level":                   "warn",
		"log_format":                  "json",
		"dev":                         "true",
		"ws_allowed_origins":          "https://App.example.com",
		"limit_send_rate":             "0.5",
		"limit_send_burst":            "3",
		"limit_conv_rate":             "7",
		"limit_conv_burst":            "8",
		"limit_read_rate":             "0",
		"limit_read_burst":            "9",
		"limit_typing_rate":           "1.5",
		"limit_typing_burst":          "2",
		"limit_api_rate":              "11",
		"limit_api_burst":             "12",
		"limit_connect_rate":          "13",
		"limit_connect_burst":         "14",
		"limit_connect_user_rate":     "0.25",
		"limit_connect_user_burst":    "4",
		"max_connections_per_user":    "0",
		"max_pending_connects_per_ip": "7",
		"connect_budget_rate":         "250",
		"connect_budget_queue":        "16",
		"redis_url":                   "redis://:pw@redis:6379/1",
		"presence_push":               "false",
		"presence_grace":              "15s",
		"cursor_flush":                "15s",
		"delivered_flush":             "2s",
		"shutdown_timeout":            "1m",

		"max_idle_http_connections_per_ip": "9",

		"mqtts_addr":             "0.0.0.0:8883",
		"https_addr":             "0.0.0.0:8443",
		"hsts_max_age":           "8760h",
		"mqtts_client_ca":        "/etc/chatd/devices-ca.pem",
		"mqtts_client_crl":       "/etc/chatd/devices-crl.pem",
		"mqtts_client_auth":      "require",
		"proxy_protocol":         "true",
		"proxy_protocol_trusted": "10.0.0.0/8,192.168.1.10",
		"forwarded_trusted":      "10.0.0.0/8,2001:db8::/32",
		"metrics_addr":           "127.0.0.1:9100",
		"metrics_token":          "m3tr1cs-t0ken_0123456789abcdef",
		"jwks_url":               "https://idp.example/certs",
		"jwks_refresh_interval":  "1h",
		"jwt_issuer":             "https://idp.example",
		"jwt_audience":           "chatd,chat-web",
		"jwt_user_claim":         "uid",

		"push_delay":          "500ms",
		"push_min_interval":   "1m",
		"push_preview":        "true",
		"push_timeout":        "3s",
		"push_queue_size":     "50",
		"push_kafka_topic":    "push.requests",
		"push_webhook_url":    "https://pusher.internal/push",
		"push_webhook_secret": strings.Repeat("w", 32),
		"vapid_private_key":   "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE",
		"vapid_subject":       "mailto:ops@example.com",
		"push_allow_http":     "true",

		"max_upload_bytes":     "10MiB",
		"max_avatar_bytes":     "2MiB",
		"upload_types":         "image/png,audio/*",
		"upload_ttl":           "2h",
		"upload_url_expiry":    "10m",
		"download_url_expiry":  "30s",
		"upload_bytes_per_day": "0",
		"limit_upload_rate":    "2",
		"limit_upload_burst":   "5",
		"image_max_pixels":     "1000000",
		"thumbnail_workers":    "3",
		"s3_endpoint":          "minio:9000",
		"s3_bucket":            "chat",
		"s3_region":            "eu-west-1",
		"s3_access_key":        "AK",
		"s3_secret_key":        "SK",
		"s3_use_tls":           "false",
	}
	if len(vals) != len(Keys()) {
		t.Fatalf("test covers %d keys, config has %d", len(vals), len(Keys()))
	}
	check := func(t *testing.T, s Settings) {
		t.Helper()
		want := Settings{
			MQTTAddr: "0.0.0.0:1884", HTTPAddr: ":8081", DatabaseURL: "postgres://u:p@db:5432/chat",
			DataDir: "/var/lib/chatd", JWTSecret: strings.Repeat("s", 32), JWTPublicKey: "/etc/chatd/idp.pem",
			KafkaBrokers: []string{"a:1", "b:2"}, KafkaTopic: "events", NodeID: "node-1",
			TLSCert: "/c.pem", TLSKey: "/k.pem", MaxBodyBytes: 100, MaxMembers: 50, LargeGroup: 5,
			EditWindow: 15 * time.Minute, RecallWindow: chat.NoLimit,
			MaxInflight: 8, DBMaxConns: 4, SendTimeout: 2 * time.Second, LogLevel: "warn", LogFormat: "json",
			Dev: true, WSAllowedOrigins: []string{"https://app.example.com"}, LimitSendRate: 0.5,
			LimitSendBurst: 3, ShutdownTimeout: time.Minute,
			LimitConvRate: 7, LimitConvBurst: 8, LimitReadRate: 0, LimitReadBurst: 9,
			LimitTypingRate: 1.5, LimitTypingBurst: 2, LimitAPIRate: 11, LimitAPIBurst: 12,
			LimitConnectRate: 13, LimitConnectBurst: 14, RedisURL: "redis://:pw@redis:6379/1", PresencePush: false, PresenceGrace: 15 * time.Second,
			CursorFlush: 15 * time.Second, DeliveredFlush: 2 * time.Second,
			LimitConnectUserRate: 0.25, LimitConnectUserBurst: 4, MaxConnectionsPerUser: 0, MaxPendingConnectsPerIP: 7, MaxIdleHTTPConnsPerIP: 9,
			ConnectBudgetRate: 250, ConnectBudgetQueue: 16,
			OpsSettings: OpsSettings{MQTTSAddr: "0.0.0.0:8883", HTTPSAddr: "0.0.0.0:8443", HSTSMaxAge: 8760 * time.Hour,
				MQTTSClientCA: "/etc/chatd/devices-ca.pem", MQTTSClientCRL: "/etc/chatd/devices-crl.pem", MQTTSClientAuth: "require", ProxyProtocol: true,
				ProxyTrusted:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.10/32")},
				ForwardedTrusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")},
				MetricsAddr:      "127.0.0.1:9100", MetricsToken: "m3tr1cs-t0ken_0123456789abcdef", JWKSURL: "https://idp.example/certs", JWKSRefresh: time.Hour,
				JWTIssuer: "https://idp.example", JWTAudience: []string{"chatd", "chat-web"}, JWTUserClaim: "uid"},
			PushSettings: PushSettings{PushDelay: 500 * time.Millisecond, PushMinInterval: time.Minute, PushPreview: true,
				PushTimeout: 3 * time.Second, PushQueueSize: 50, PushKafkaTopic: "push.requests",
				PushWebhookURL: "https://pusher.internal/push", PushWebhookSecret: strings.Repeat("w", 32),
				VAPIDPrivateKey: "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE", VAPIDSubject: "mailto:ops@example.com", PushAllowHTTP: true},
			AttachmentSettings: AttachmentSettings{MaxUploadBytes: 10 << 20, MaxAvatarBytes: 2 << 20, UploadTypes: []string{"image/png", "audio/*"},
				UploadTTL: 2 * time.Hour, UploadURLExpiry: 10 * time.Minute, DownloadURLExpiry: 30 * time.Second,
				LimitUploadRate: 2, LimitUploadBurst: 5, ImageMaxPixels: 1000000, ThumbnailWorkers: 3,
				S3Endpoint: "minio:9000", S3Bucket: "chat", S3Region: "eu-west-1", S3AccessKey: "AK", S3SecretKey: "SK"},
		}
		s.ConfigFile, s.sources = "", nil
		if !reflect.DeepEqual(s, want) {
			t.Errorf("got  %+v\nwant %+v", s, want)
		}
	}
	t.Run("yaml", func(t *testing.T) {
		var b strings.Builder
		for k, v := range vals {
			b.WriteString(k + ": " + strconv.Quote(v) + "\n")
		}
		check(t, mustLoad(t, []string{"-config", writeYAML(t, b.String())}, nil))
	})
	t.Run("env", func(t *testing.T) {
		e := map[string]string{}
		for k, v := range vals {
			e["CHAT_"+strings.ToUpper(k)] = v
		}
		check(t, mustLoad(t, nil, e))
	})
	t.Run("flag", func(t *testing.T) {
		var args []string
		for k, v := range vals {
			args = append(args, "-"+strings.ReplaceAll(k, "_", "-")+"="+v)
		}
		check(t, mustLoad(t, args, nil))
	})
}

func TestBadValues(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		yaml string
		want []string // substrings of the error
	}{
		{name: "addr without port", env: map[string]string{"CHAT_MQTT_ADDR": "localhost"},
			want: []string{"mqtt_addr", "env CHAT_MQTT_ADDR", "not host:port", "127.0.0.1:1883"}},
		{name: "addr bad port", args: []string{"-http-addr", "127.0.0.1:99999"},
			want: []string{"http_addr", "flag -http-addr", "port"}},
		{name: "not a number", env: map[string]string{"CHAT_MAX_BODY_BYTES": "lots"},
			want: []string{"max_body_bytes", "env CHAT_MAX_BODY_BYTES", "not a whole number", "16384"}},
		{name: "zero", args: []string{"-max-inflight", "0"},
			want: []string{"max_inflight", "flag -max-inflight", "must be positive"}},
		{name: "negative", yaml: "db_max_conns: -3\n",
			want: []string{"db_max_conns", "yaml ", ":1", "must be positive"}},
		{name: "negative rate", env: map[string]string{"CHAT_LIMIT_SEND_RATE": "-1"},
			want: []string{"limit_send_rate", "negative"}},
		{name: "zero burst", env: map[string]string{"CHAT_LIMIT_SEND_BURST": "0"},
			want: []string{"limit_send_burst", "must be positive"}},
		{name: "rate not a number", env: map[string]string{"CHAT_LIMIT_API_RATE": "fast"},
			want: []string{"limit_api_rate", "not a number"}},
		{name: "negative conv rate", args: []string{"-limit-conv-rate=-2"},
			want: []string{"limit_conv_rate", "negative"}},
		{name: "zero connect burst", yaml: "limit_connect_burst: 0\n",
			want: []string{"limit_connect_burst", "must be positive"}},
		{name: "redis url scheme", env: map[string]string{"CHAT_REDIS_URL": "http://redis:6379"},
			want: []string{"redis_url", "redis://"}},
		{name: "duration without unit", yaml: "send_timeout: 5\n",
			want: []string{"send_timeout", "yaml", "not a duration", "5s"}},
		{name: "zero duration", args: []string{"-shutdown-timeout=0s"},
			want: []string{"shutdown_timeout", "flag -shutdown-timeout", "must be positive"}},
		{name: "presence grace too long", env: map[string]string{"CHAT_PRESENCE_GRACE": "2h"},
			want: []string{"presence_grace", "not between 100ms and 1h"}},
		{name: "cursor flush too long", env: map[string]string{"CHAT_CURSOR_FLUSH": "2m"},
			want: []string{"cursor_flush", "env CHAT_CURSOR_FLUSH", "not between 100ms and 1m", "5s"}},
		{name: "cursor flush zero", yaml: "cursor_flush: 0s\n",
			want: []string{"cursor_flush", "yaml", "must be positive"}},
		{name: "delivered flush too short", args: []string{"-delivered-flush=10ms"},
			want: []string{"delivered_flush", "flag -delivered-flush", "not between 50ms and 10s", "250ms"}},
		{name: "jwks refresh below a second", env: map[string]string{"CHAT_JWKS_REFRESH_INTERVAL": "500ms"},
			want: []string{"jwks_refresh_interval", "env CHAT_JWKS_REFRESH_INTERVAL", "below 1s", "15m"}},
		{name: "delivered flush without unit", env: map[string]string{"CHAT_DELIVERED_FLUSH": "250"},
			want: []string{"delivered_flush", "not a duration"}},
		{name: "bad level", env: map[string]string{"CHAT_LOG_LEVEL": "loud"},
			want: []string{"log_level", "debug, info, warn or error"}},
		{name: "bad format", yaml: "log_format: xml\n", want: []string{"log_format", "text or json"}},
		{name: "bad bool", env: map[string]string{"CHAT_DEV": "yes please"}, want: []string{"dev", "true or false"}},
		{name: "bad broker", env: map[string]string{"CHAT_KAFKA_BROKERS": "k1:9092,k2"},
			want: []string{"kafka_brokers", `broker "k2"`}},
		{name: "bad origin", env: map[string]string{"CHAT_WS_ALLOWED_ORIGINS": "app.example.com"},
			want: []string{"ws_allowed_origins", "origin"}},
		{name: "origin with path", env: map[string]string{"CHAT_WS_ALLOWED_ORIGINS": "https://a.example/x"},
			want: []string{"ws_allowed_origins", "no path"}},
		{name: "members below 2", args: []string{"-max-members=1"}, want: []string{"max_members", "below 2"}},
		{name: "node id", env: map[string]string{"CHAT_NODE_ID": "a/b"}, want: []string{"node_id", `'/'`}},
		{name: "tls half", env: map[string]string{"CHAT_TLS_CERT": "/c.pem"},
			want: []string{"tls_key", "env CHAT_TLS_CERT", "together"}},
		{name: "kafka without topic", env: map[string]string{"CHAT_KAFKA_BROKERS": "k:9092"}, yaml: "kafka_topic: ''\n",
			want: []string{"kafka_topic", "kafka_brokers"}},
		{name: "unknown flag", args: []string{"-max-member", "3"}, want: []string{"not defined", "-help"}},
		{name: "positional", args: []string{"serve"}, want: []string{`unexpected argument "serve"`}},
		{name: "missing file", args: []string{"-config", "/nonexistent/chatd.yaml"},
			want: []string{"flag -config", "read config file", "fix the path"}},
		{name: "not a mapping", yaml: "- a\n- b\n", want: []string{"mapping"}},
		{name: "bad yaml", yaml: "max_members: [\n", want: []string{"parse"}},
		{name: "list for scalar", yaml: "max_members: [1, 2]\n", want: []string{"max_members", "single value"}},
		{name: "duplicate", yaml: "dev: true\ndev: false\n", want: []string{"dev", "twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range c.env {
				e[k] = v
			}
			if c.yaml != "" {
				e["CHAT_CONFIG"] = writeYAML(t, c.yaml)
			}
			_, err := Load(c.args, env(e))
			wantLoadError(t, err, c.want)
		})
	}
}

func TestUnknownYAMLKey(t *testing.T) {
	path := writeYAML(t, "mqtt_addr: 127.0.0.1:1\nmax_member: 10\n")
	_, err := Load([]string{"-config", path}, nil)
	if err == nil {
		t.Fatal("unknown key accepted")
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "max_member" {
		t.Fatalf("error %v does not name the key", err)
	}
	for _, w := range []string{"unknown key", path + ":2", "did you mean max_members"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	_, err = Load([]string{"-config", writeYAML(t, "completely_unrelated: 1\n")}, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown key") || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("unrelated unknown key: %v", err)
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	_, err := Load(nil, env(map[string]string{"CHAT_JWT_SECRET": "short-secret-value"}))
	if err == nil {
		t.Fatal("short secret accepted")
	}
	if strings.Contains(err.Error(), "short-secret-value") {
		t.Errorf("error leaks the secret: %v", err)
	}
	if !strings.Contains(err.Error(), "jwt_secret") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Errorf("error does not say what to do: %v", err)
	}
	_, err = Load(nil, env(map[string]string{"CHAT_DATABASE_URL": "postgres://u:hunter2@h/db\n"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("database_url error leaks or is missing: %v", err)
	}
	_, err = Load(nil, env(map[string]string{"CHAT_REDIS_URL": "http://:hunter2@h:6379"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("redis_url error leaks or is missing: %v", err)
	}
}

func TestRedacted(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{
		"CHAT_JWT_SECRET":   strings.Repeat("k", 40),
		"CHAT_DATABASE_URL": "postgres://chat:hunter2@db:5432/chat?sslmode=require",
	})
	r := s.Redacted()
	if r["jwt_secret"] != "[redacted]" {
		t.Errorf("jwt_secret = %v", r["jwt_secret"])
	}
	if got := r["database_url"].(string); strings.Contains(got, "hunter2") || !strings.Contains(got, "db:5432/chat") {
		t.Errorf("database_url = %q", got)
	}
	rs := mustLoad(t, nil, map[string]string{"CHAT_REDIS_URL": "redis://:hunter2@redis:6379/0"})
	if got := rs.Redacted()["redis_url"].(string); strings.Contains(got, "hunter2") || !strings.Contains(got, "redis:6379") {
		t.Errorf("redis_url = %q", got)
	}
	if rl := rs.RateLimits(); rl.Send.Rate != 10 || rl.Send.Burst != 30 || rl.Conv.Burst != 200 || rl.Connect.Rate != 500 || rl.ConnectUser.Burst != 20 || rl.API.Burst != 100 {
		t.Errorf("RateLimits() = %+v", rl)
	}
	for _, k := range Keys() {
		if _, ok := r[k]; !ok {
			t.Errorf("Redacted lacks %s", k)
		}
	}
	for in, want := range map[string]string{
		"host=/tmp user=postgres password=hunter2 dbname=chat": "host=/tmp user=postgres password=xxxxx dbname=chat",
		"host=/tmp password='hun ter2' dbname=chat":            "host=/tmp password=xxxxx dbname=chat",
		"postgres://h/db?password=hunter2":                     "postgres://h/db?password=xxxxx",
		"":                                                     "",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if lv := s.LogValue().String(); strings.Contains(lv, "hunter2") || strings.Contains(lv, "kkkk") {
		t.Errorf("LogValue leaks secrets: %s", lv)
	}
}

func TestHelp(t *testing.T) {
	_, err := Load([]string{"-help"}, nil)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-help: %v, want flag.ErrHelp", err)
	}
	var b strings.Builder
	PrintUsage(&b)
	for _, k := range keys {
		if !strings.Contains(b.String(), "-"+k.flag) || !strings.Contains(b.String(), k.env) {
			t.Errorf("usage lacks -%s / %s", k.flag, k.env)
		}
	}
	// What cmd/chatd reads from the environment itself.
	for _, env := range []string{"CHAT_PPROF_ADDR", "GODEBUG", "adaptivestackstart=0"} {
		if !strings.Contains(b.String(), env) {
			t.Errorf("usage lacks %s", env)
		}
	}
}

// TestShippedYAML proves configs/chatd.yaml documents every key, each with
// a comment, and that its values are the defaults.
func TestShippedYAML(t *testing.T) {
	path := filepath.Join("..", "configs", "chatd.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for _, k := range Keys() {
		re := regexp.MustCompile(`^` + k + `:`)
		found := false
		for i, l := range lines {
			if re.MatchString(l) {
				found = true
				// A comment block precedes the key (possibly shared with
				// the key right above, as for tls_cert/tls_key).
				j := i - 1
				for j >= 0 && !strings.HasPrefix(lines[j], "#") && strings.TrimSpace(lines[j]) != "" {
					j--
				}
				if j < 0 || !strings.HasPrefix(lines[j], "#") {
					t.Errorf("%s has no comment", k)
				}
			}
		}
		if !found {
			t.Errorf("configs/chatd.yaml does not document %s", k)
		}
	}
	s := mustLoad(t, []string{"-config", path}, nil)
	d := mustLoad(t, nil, nil)
	s.ConfigFile, s.sources, d.sources = "", nil, nil
	if !reflect.DeepEqual(s, d) {
		t.Errorf("configs/chatd.yaml differs from the defaults:\n file %+v\n code %+v", s, d)
	}
}

func TestEmptyYAML(t *testing.T) {
	for _, body := range []string{"", "# only comments\n", "---\n"} {
		if _, err := Load([]string{"-config", writeYAML(t, body)}, nil); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
	s := mustLoad(t, []string{"-config", writeYAML(t, "max_members:\n")}, nil)
	if s.MaxMembers != 1000 {
		t.Errorf("null value should keep the default, got %d", s.MaxMembers)
	}
}

// TestARedisURLChatdCannotUseIsRefusedByLoad: a redis_url with a host and
// the redis:// scheme was accepted by Load although the rate limiter's
// parser (go-redis) refuses it: a database that is not a number, a path
// of more than one part, an option it does not know or cannot read. chatd
// then started its PostgreSQL, migrated, and failed with exit status 1,
// which a supervisor restarts every 2 s for ever, where a bad setting
// exits 2. The value is a secret: the error never shows the password.
func TestARedisURLChatdCannotUseIsRefusedByLoad(t *testing.T) {
	for _, v := range []string{
		"redis://:hunter2secret@redis:6379/abc",
		"redis://:hunter2secret@redis:6379/0/1",
		"redis://:hunter2secret@redis:6379/0?pool=3",
		"rediss://:hunter2secret@redis:6380/0?dial_timeout=soon",
	} {
		t.Run(v, func(t *testing.T) {
			_, err := Load(nil, env(map[string]string{"CHAT_REDIS_URL": v}))
			wantLoadError(t, err, []string{"redis_url", "env CHAT_REDIS_URL", "not shown: secret"})
			if err != nil && strings.Contains(err.Error(), "hunter2secret") {
				t.Errorf("the password is in the error: %v", err)
			}
		})
	}
	for _, v := range []string{"redis://:pw@redis:6379/2", "rediss://user:pw@redis/0?client_name=chatd&dial_timeout=3s", "redis://redis"} {
		if s := mustLoad(t, nil, map[string]string{"CHAT_REDIS_URL": v}); s.RedisURL != v {
			t.Errorf("redis_url %q loaded as %q", v, s.RedisURL)
		}
	}
}

// TestAConfigFileOfMoreThanOneYAMLDocumentIsRefused: only the file's first
// YAML document was read, so keys after a "---" line (overrides appended
// to a copy of configs/chatd.yaml, two files concatenated) were ignored
// without a word, their values left at the first document's or the
// defaults; a bad value there went unnoticed too.
func TestAConfigFileOfMoreThanOneYAMLDocumentIsRefused(t *testing.T) {
	path := writeYAML(t, "max_members: 5\n---\nmax_members: 7\nmqtt_addr: bad\n")
	_, err := Load([]string{"-config", path}, nil)
	wantLoadError(t, err, []string{"yaml " + path + ":2", "more than one YAML document"})
	// A lone document marker, or a comment after the document, is one document.
	for _, body := range []string{"---\nmax_members: 5\n", "max_members: 5\n...\n", "max_members: 5\n# the end\n"} {
		if s := mustLoad(t, []string{"-config", writeYAML(t, body)}, nil); s.MaxMembers != 5 {
			t.Errorf("%q: max_members %d, want 5", body, s.MaxMembers)
		}
	}
}

// A key given twice is refused even when its first value is empty
// ("key:" keeps the default): the second value used to be taken without
// a word, though a key given twice with values is refused.
func TestAYAMLKeyGivenTwiceIsRefusedWhenTheFirstIsEmpty(t *testing.T) {
	for _, body := range []string{"max_members:\nmax_members: 7\n", "max_members: 7\nmax_members:\n"} {
		path := writeYAML(t, body)
		_, err := Load([]string{"-config", path}, nil)
		wantLoadError(t, err, []string{"max_members", "yaml " + path + ":2", "appears twice"})
	}
}

// Every true/false setting reads its value as push_preview does, spaces
// around it trimmed, from every layer: CHAT_DEV="true " used to be
// refused ("is not true or false") where CHAT_PUSH_PREVIEW="true " was true.
func TestEveryBooleanSettingTrimsItsValue(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{"CHAT_DEV": "true ", "CHAT_PUSH_PREVIEW": " true"})
	if !s.Dev || !s.PushPreview {
		t.Fatalf("dev %v, push_preview %v; want both true", s.Dev, s.PushPreview)
	}
	s = mustLoad(t, []string{"-config", writeYAML(t, "dev: \" true\"\n")}, nil)
	if !s.Dev {
		t.Fatalf("dev from YAML %q: false, want true", " true")
	}
}

// Port 0 picks a free port for a listener, but names none to connect
// to: a broker on port 0 was accepted and chatd then failed every dial
// to Kafka ("could not ensure the Kafka topic", the relay retrying for
// ever).
func TestAKafkaBrokerOnPortZeroIsRefused(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
		{"port zero", map[string]string{"CHAT_KAFKA_BROKERS": "k1:9092,k2:0"},
			[]string{"kafka_brokers (from env CHAT_KAFKA_BROKERS)", `broker "k2:0"`, "port", "kafka1:9092"}},
	}, nil)
}
