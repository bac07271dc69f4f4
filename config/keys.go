package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	chat "github.com/chatd/chatd"
)

// key describes one setting: its names, default, documentation and parser.
type key struct {
	name    string // yaml key
	env     string // environment variable
	flag    string // flag name without the dash
	def     string // default, as text
	help    string // one line for -help
	fix     string // what to do when the value is invalid
	secret  bool   // never echo the value
	boolean bool   // flag takes no argument
	list    bool   // comma-separated; a YAML list is accepted too
	apply   func(s *Settings, raw string) error
}

// MinJWTSecretBytes is the shortest accepted jwt_secret (RFC 7518 §3.2:
// an HS256 key must be at least 256 bits).
const MinJWTSecretBytes = 32

func mk(name, def, help, fix string, apply func(*Settings, string) error) *key {
	return &key{
		name:  name,
		env:   "CHAT_" + strings.ToUpper(name),
		flag:  strings.ReplaceAll(name, "_", "-"),
		def:   def,
		help:  help,
		fix:   fix,
		apply: apply,
	}
}

func secretKey(k *key) *key { k.secret = true; return k }

// rateKey is a per-second rate: fractions allowed, 0 means unlimited.
func rateKey(name, def, help string, field func(*Settings) *float64) *key {
	return mk(name, def, help, "use a number per second, 0 or more, e.g. "+def+" or 0.5; 0 turns the limit off",
		func(s *Settings, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return errors.New("is not a number")
			}
			if f < 0 {
				return errors.New("is negative")
			}
			*field(s) = f
			return nil
		})
}

// burstKey is a token bucket size: a whole number of at least 1.
func burstKey(name, def, help string, field func(*Settings) *int) *key {
	return mk(name, def, help, "use a whole number of at least 1, e.g. "+def,
		func(s *Settings, v string) (err error) { *field(s), err = parseInt(v, 1, 1000000); return })
}
func boolKey(k *key) *key { k.boolean = true; return k }
func listKey(k *key) *key { k.list = true; return k }

// switchKey is a true/false key whose flag takes no argument.
func switchKey(name, def, help string, field func(*Settings) *bool) *key {
	return boolKey(mk(name, def, help, "use true or false",
		func(s *Settings, v string) (err error) { *field(s), err = parseBool(v); return }))
}

// parseBool is every true/false key's reading: strconv's words, spaces
// around them trimmed as around every other kind of value.
func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, errors.New("is not true or false")
	}
	return b, nil
}

// urlKey is an optional URL ("" = none) with a host and one of schemes;
// notA says what a bad value is not ("an https:// URL").
func urlKey(name, help, fix, notA string, field func(*Settings) *string, schemes ...string) *key {
	return mk(name, "", help, fix,
		func(s *Settings, v string) error {
			if v != "" {
				u, err := url.Parse(v)
				if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
					return errors.New("is not " + notA)
				}
			}
			*field(s) = v
			return nil
		})
}

// keys in documentation order (configs/chatd.yaml follows it).
var keys = append([]*key{
	mk("mqtt_addr", "127.0.0.1:1883", "MQTT TCP listen address (plain); off = none",
		"use host:port such as 127.0.0.1:1883 or 0.0.0.0:1883, or off",
		func(s *Settings, v string) (err error) { s.MQTTAddr, err = parseListenAddr(v); return }),
	mk("http_addr", "127.0.0.1:8080", "HTTP API and MQTT-over-WebSocket listen address (plain); off = none",
		"use host:port such as 127.0.0.1:8080, or off",
		func(s *Settings, v string) (err error) { s.HTTPAddr, err = parseListenAddr(v); return }),
	secretKey(mk("database_url", "", `PostgreSQL URL; "" runs an embedded PostgreSQL in <data_dir>/pg`,
		"use a URL like postgres://chat:PASSWORD@db.example:5432/chat, or leave it empty for the embedded database",
		func(s *Settings, v string) error {
			if strings.ContainsAny(v, "\n\r\x00") {
				return errors.New("contains a line break or NUL")
			}
			s.DatabaseURL = v
			return nil
		})),
	mk("data_dir", "./data", "directory for the embedded PostgreSQL, jwt.secret and attachments on local disk (blobs/)",
		"use a writable directory such as /var/lib/chatd",
		func(s *Settings, v string) error {
			if strings.TrimSpace(v) == "" || strings.ContainsRune(v, 0) {
				return errors.New("must be a directory path")
			}
			s.DataDir = v
			return nil
		}),
	secretKey(mk("jwt_secret", "", `HS256 secret; "" uses a random secret kept in <data_dir>/jwt.secret`,
		fmt.Sprintf("use at least %d bytes, e.g. the output of `openssl rand -hex 32`, or leave it empty", MinJWTSecretBytes),
		func(s *Settings, v string) error {
			if v != "" && len(v) < MinJWTSecretBytes {
				return fmt.Errorf("is %d bytes, shorter than %d", len(v), MinJWTSecretBytes)
			}
			s.JWTSecret = v
			return nil
		})),
	mk("jwt_public_key", "", "PEM RSA, ECDSA P-256 or Ed25519 public key file of an identity provider; enables RS256/ES256/EdDSA tokens",
		"give the path of a PEM public key file, or leave it empty for HS256 only",
		func(s *Settings, v string) error { s.JWTPublicKey = v; return nil }),
	listKey(mk("kafka_brokers", "", `comma-separated Kafka brokers (host:port); "" disables Kafka`,
		"use host:port[,host:port...] such as kafka1:9092,kafka2:9092, or leave it empty",
		func(s *Settings, v string) error {
			list := splitList(v)
			for _, b := range list {
				if _, err := parseAddr(b); err != nil {
					return fmt.Errorf("broker %q: %w", b, err)
				}
				// Port 0 means "any free port" to a listener, no port to a dial.
				if _, port, _ := net.SplitHostPort(b); port == "0" {
					return fmt.Errorf("broker %q: port 0 is not a port to connect to", b)
				}
			}
			s.KafkaBrokers = list
			return nil
		})),
	mk("kafka_topic", "chat.events", "Kafka topic of the event stream",
		"use letters, digits, '.', '_' and '-' (at most 249)",
		func(s *Settings, v string) error {
			if v != "" && !kafkaTopicRE.MatchString(v) {
				return errors.New("is not a valid Kafka topic name")
			}
			s.KafkaTopic = v
			return nil
		}),
	mk("node_id", "", `this node's id in a cluster; "" means hostname-pid`,
		"use up to 128 letters, digits, '.', '_' and '-'",
		func(s *Settings, v string) error {
			if len(v) > 128 {
				return errors.New("is longer than 128 bytes")
			}
			for _, r := range v {
				if !nodeIDRune(r) {
					return fmt.Errorf("contains %q", r)
				}
			}
			s.NodeID = v
			return nil
		}),
	mk("tls_cert", "", "PEM certificate (chain) for mqtts_addr and https_addr, reloaded when the file changes or on SIGHUP; set with tls_key",
		"give the path of a PEM certificate file",
		func(s *Settings, v string) error { s.TLSCert = v; return nil }),
	mk("tls_key", "", "PEM private key of tls_cert",
		"give the path of a PEM private key file",
		func(s *Settings, v string) error { s.TLSKey = v; return nil }),
	mk("max_body_bytes", "16384", "largest message body in bytes",
		"use a whole number of bytes between 1 and 33554432 (32 MiB: a request allows six bytes of JSON per byte of body and must fit an MQTT packet), e.g. 16384",
		func(s *Settings, v string) (err error) {
			s.MaxBodyBytes, err = parseInt(v, 1, chat.MaxBodyBytesCeiling)
			return
		}),
	mk("max_members", "1000", "most members in a group",
		"use a whole number between 2 and 1000000, e.g. 1000",
		func(s *Settings, v string) (err error) { s.MaxMembers, err = parseInt(v, 2, 1000000); return }),
	mk("large_group", "200", "above this many members message.new events carry no body",
		"use a whole number of members of at least 1, e.g. 200",
		func(s *Settings, v string) (err error) { s.LargeGroup, err = parseInt(v, 1, 1000000); return }),
	mk("edit_window", "48h", "how long after sending a sender may edit a message; 0 for no limit",
		"use a Go duration such as 48h or 15m, or 0 for no limit",
		func(s *Settings, v string) (err error) { s.EditWindow, err = parseWindow(v); return }),
	mk("recall_window", "24h", "how long after sending a sender may recall a message (a group's owner and admins may at any time); 0 for no limit",
		"use a Go duration such as 24h or 2m, or 0 for no limit",
		func(s *Settings, v string) (err error) { s.RecallWindow, err = parseWindow(v); return }),
	mk("max_inflight", "64", "outbound QoS 1 messages awaiting PUBACK per session",
		"use a whole number between 1 and 65535, e.g. 64",
		func(s *Settings, v string) (err error) { s.MaxInflight, err = parseInt(v, 1, 65535); return }),
	mk("db_max_conns", "32", "PostgreSQL connection pool size",
		"use a whole number between 1 and 10000, e.g. 32",
		func(s *Settings, v string) error {
			n, err := parseInt(v, 1, 10000)
			s.DBMaxConns = int32(n)
			return err
		}),
	// A send timeout of hours would hold a connect turn and a database
	// connection that long for a send no client still waits for; one of a
	// few milliseconds would fail every send.
	mk("send_timeout", "5s", "deadline of one message send (database commit included), between 100ms and 1m",
		"use a Go duration between 100ms and 1m, e.g. 5s or 1500ms",
		func(s *Settings, v string) (err error) {
			s.SendTimeout, err = parseDurationBetween(v, 100*time.Millisecond, time.Minute, "100ms and 1m")
			return
		}),
	mk("log_level", "info", "log level: debug, info, warn or error",
		"use debug, info, warn or error",
		func(s *Settings, v string) (err error) {
			s.LogLevel, err = parseEnum(v, "debug", "info", "warn", "error")
			return
		}),
	mk("log_format", "text", "log format: text or json",
		"use text or json",
		func(s *Settings, v string) (err error) { s.LogFormat, err = parseEnum(v, "text", "json"); return }),
	switchKey("dev", "false", "development mode",
		func(s *Settings) *bool { return &s.Dev }),
	listKey(mk("ws_allowed_origins", "", "comma-separated extra browser origins allowed to open WebSockets (same-origin always is)",
		"use origins like https://app.example.com,http://localhost:3000",
		func(s *Settings, v string) error {
			list := splitList(v)
			for i, o := range list {
				n, err := parseOrigin(o)
				if err != nil {
					return fmt.Errorf("origin %q: %w", o, err)
				}
				list[i] = n
			}
			s.WSAllowedOrigins = list
			return nil
		})),
	rateKey("limit_send_rate", "10", "messages per second per user; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitSendRate }),
	burstKey("limit_send_burst", "30", "messages a user may send at once before limit_send_rate applies",
		func(s *Settings) *int { return &s.LimitSendBurst }),
	rateKey("limit_conv_rate", "100", "messages per second into one conversation, all senders together; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitConvRate }),
	burstKey("limit_conv_burst", "200", "messages one conversation may take at once before limit_conv_rate applies",
		func(s *Settings) *int { return &s.LimitConvBurst }),
	rateKey("limit_read_rate", "20", "read receipt writes per second per user (receipts merged into a pending one are free); 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitReadRate }),
	burstKey("limit_read_burst", "100", "read receipt writes a user may make at once",
		func(s *Settings) *int { return &s.LimitReadBurst }),
	rateKey("limit_typing_rate", "5", "typing events forwarded per second per user; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitTypingRate }),
	burstKey("limit_typing_burst", "20", "typing events a user may forward at once",
		func(s *Settings) *int { return &s.LimitTypingBurst }),
	rateKey("limit_api_rate", "50", "HTTP requests and RPC calls per second per user; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitAPIRate }),
	burstKey("limit_api_burst", "100", "HTTP requests and RPC calls a user may make at once",
		func(s *Settings) *int { return &s.LimitAPIBurst }),
	rateKey("limit_connect_rate", "500", "MQTT connection attempts per second per IP address; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitConnectRate }),
	burstKey("limit_connect_burst", "1000", "MQTT connection attempts an IP address may make at once",
		func(s *Settings) *int { return &s.LimitConnectBurst }),
	rateKey("limit_connect_user_rate", "1", "authenticated MQTT connections per second per user; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitConnectUserRate }),
	burstKey("limit_connect_user_burst", "20", "authenticated MQTT connections a user may make at once",
		func(s *Settings) *int { return &s.LimitConnectUserBurst }),
	mk("max_connections_per_user", "20", "MQTT connections (distinct client ids) one user may hold, across nodes with redis_url; 0 = unlimited",
		"use a whole number between 0 and 100000, e.g. 20; 0 turns the cap off",
		func(s *Settings, v string) (err error) { s.MaxConnectionsPerUser, err = parseInt(v, 0, 100000); return }),
	mk("max_pending_connects_per_ip", "256", "MQTT connections one client address (IPv6: its /64) may hold open before sending their CONNECT; a new one over it is closed at once; 0 = unlimited",
		"use a whole number between 0 and 1000000, e.g. 256; 0 turns the cap off",
		func(s *Settings, v string) (err error) {
			s.MaxPendingConnectsPerIP, err = parseInt(v, 0, 1000000)
			return
		}),
	mk("max_idle_http_connections_per_ip", "256", "HTTP connections one client address (IPv6: its /64; its TCP peer, trusted proxies not counted) may hold to http_addr and https_addr that serve no request: new (no request yet) or idle between two; over it the address's longest idle one is closed, or with none idle the new one; 0 = unlimited",
		"use a whole number between 0 and 1000000, e.g. 256; 0 turns the cap off",
		func(s *Settings, v string) (err error) {
			s.MaxIdleHTTPConnsPerIP, err = parseInt(v, 0, 1000000)
			return
		}),
	rateKey("connect_budget_rate", "1000", "MQTT CONNECTs this node handles per second, all clients together; 0 = unlimited",
		func(s *Settings) *float64 { return &s.ConnectBudgetRate }),
	mk("connect_budget_queue", "1000", "CONNECTs that may wait for connect_budget_rate; beyond, CONNACK 0x9F",
		"use a whole number between 0 and 1000000, e.g. 1000; 0 refuses at once when the budget is spent",
		func(s *Settings, v string) (err error) { s.ConnectBudgetQueue, err = parseInt(v, 0, 1000000); return }),
	switchKey("presence_push", "true", "push presence events to the members of shared conversations; false: presence is only queryable",
		func(s *Settings) *bool { return &s.PresencePush }),
	mk("presence_grace", "1s", "how long a user's last connection may be gone before they are announced offline; a reconnect within it is not announced",
		"use a Go duration between 100ms and 1h, e.g. 1s (mobile clients on weak networks: 10s or more)",
		func(s *Settings, v string) (err error) {
			s.PresenceGrace, err = parseDurationBetween(v, 100*time.Millisecond, time.Hour, "100ms and 1h")
			return
		}),
	mk("cursor_flush", "5s", "how often persistent sessions' delivered cursors are written; after a crash (no clean shutdown) a session is sent again up to this long of messages it had acknowledged (duplicates by seq, never a loss)",
		"use a Go duration between 100ms and 1m, e.g. 5s (1s: fewer duplicates after a crash, more writes)",
		func(s *Settings, v string) (err error) {
			s.CursorFlush, err = parseDurationBetween(v, 100*time.Millisecond, time.Minute, "100ms and 1m")
			return
		}),
	mk("delivered_flush", "250ms", "how often delivered watermarks are written: the most a sender's delivered tick (delivery.updated) waits after the recipient's device acknowledged",
		"use a Go duration between 50ms and 10s, e.g. 250ms or 1s",
		func(s *Settings, v string) (err error) {
			s.DeliveredFlush, err = parseDurationBetween(v, 50*time.Millisecond, 10*time.Second, "50ms and 10s")
			return
		}),
	secretKey(mk("redis_url", "", `Redis URL shared by the nodes' rate limits; "" keeps them in each node's memory`,
		"use a URL like redis://:PASSWORD@redis.example:6379/0 (rediss:// for TLS), or leave it empty",
		func(s *Settings, v string) error {
			if v != "" {
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
					return errors.New("is not a redis:// or rediss:// URL with a host")
				}
				// The rate limiter's own parser: a URL it refuses (a
				// database that is not a number, an unknown option)
				// would otherwise stop chatd only once it started. Its
				// errors name the part, never the password.
				if _, err := redis.ParseURL(v); err != nil {
					return fmt.Errorf("is not a URL the Redis client takes: %s", strings.TrimPrefix(err.Error(), "redis: "))
				}
			}
			s.RedisURL = v
			return nil
		})),
	// A budget below a second drops clients mid-send; one of hours
	// outlives any supervisor's stop timeout, whose SIGKILL then ends
	// chatd without its cleanup.
	mk("shutdown_timeout", "15s", "graceful shutdown budget, between 1s and 10m",
		"use a Go duration between 1s and 10m, e.g. 15s (keep it below your supervisor's stop timeout: systemd's TimeoutStopSec, Kubernetes' terminationGracePeriodSeconds)",
		func(s *Settings, v string) (err error) {
			s.ShutdownTimeout, err = parseDurationBetween(v, time.Second, 10*time.Minute, "1s and 10m")
			return
		}),
}, slices.Concat(opsKeys, pushKeys, attachmentKeys)...)

var keyByName = func() map[string]*key {
	m := map[string]*key{}
	for _, k := range keys {
		m[k.name] = k
	}
	return m
}()

var kafkaTopicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

func nodeIDRune(r rune) bool {
	return r == '.' || r == '_' || r == '-' ||
		(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

func parseAddr(v string) (string, error) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", errors.New("is not host:port")
	}
	if strings.ContainsAny(host, " /") {
		return "", fmt.Errorf("host %q is not a host name or IP address", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || port != strconv.Itoa(p) {
		return "", fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return v, nil
}

func parseInt(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, errors.New("is not a whole number")
	}
	if n < lo {
		if lo == 1 {
			return 0, errors.New("must be positive")
		}
		return 0, fmt.Errorf("is below %d", lo)
	}
	if n > hi {
		return 0, fmt.Errorf("is above %d", hi)
	}
	return n, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, errors.New("is not a duration (a number with a unit: ms, s, m, h)")
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// parseDurationBetween is parseDuration within lo and hi; between names
// them for the error ("1m and 168h").
func parseDurationBetween(v string, lo, hi time.Duration, between string) (time.Duration, error) {
	d, err := parseDuration(v)
	if err == nil && (d < lo || d > hi) {
		return 0, errors.New("is not between " + between)
	}
	return d, err
}

// parseWindow reads an edit or recall window: 0 means no limit.
func parseWindow(v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "0" {
		return chat.NoLimit, nil
	}
	return parseDuration(v)
}

func parseEnum(v string, allowed ...string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(v))
	for _, a := range allowed {
		if l == a {
			return a, nil
		}
	}
	return "", errors.New("is not one of " + strings.Join(allowed, ", "))
}

func splitList(v string) []string {
	out := []string{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseOrigin accepts scheme://host[:port] (http or https) and returns it in
// lower case without the scheme's default port, the form browsers send in
// the Origin header (RFC 6454 leaves the default port out), which the
// WebSocket listeners compare it with as a string.
func parseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("is not an http:// or https:// origin")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errors.New("an origin has no path, query, fragment or user")
	}
	host := u.Host
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return strings.ToLower(u.Scheme + "://" + host), nil
}

var kvPasswordRE = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactSecret shows whether a secret is set, not what it is.
func redactSecret(v string) string {
	if v == "" {
		return ""
	}
	return "[redacted]"
}

// redactURL masks the password of a PostgreSQL URL or keyword/value string.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return "[redacted: unparsable URL]"
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	if strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://") {
		u, err := url.Parse(s)
		if err != nil {
			return "[redacted: unparsable URL]"
		}
		return u.Redacted()
	}
	return kvPasswordRE.ReplaceAllString(s, "${1}xxxxx")
}
