package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	chat "github.com/chatd/chatd"
)

// Settings are chatd's resolved settings. Field comments name the YAML key;
// the environment variable is CHAT_ + the key in upper case and the flag is
// the key with dashes (-max-body-bytes).
type Settings struct {
	// ConfigFile is the YAML file that was read, "" when none was named.
	ConfigFile string

	MQTTAddr    string // mqtt_addr: MQTT TCP listener, host:port
	HTTPAddr    string // http_addr: HTTP API and MQTT-over-WebSocket listener, host:port
	DatabaseURL string // database_url: PostgreSQL URL; "" runs the embedded cluster in DataDir/pg
	DataDir     string // data_dir: embedded PostgreSQL, jwt.secret

	// JWTSecret is the HS256 secret (its bytes, as given); "" means chatd
	// uses the random secret kept in DataDir/jwt.secret.
	JWTSecret    string
	JWTPublicKey string // jwt_public_key: PEM RSA or Ed25519 public key path; enables RS256/EdDSA

	KafkaBrokers []string // kafka_brokers: host:port list; empty = no Kafka
	KafkaTopic   string   // kafka_topic
	NodeID       string   // node_id: resolved; hostname-pid when not set

	TLSCert string // tls_cert: PEM certificate for MQTT TCP and HTTP/WS
	TLSKey  string // tls_key: its private key

	MaxBodyBytes int // max_body_bytes: message body limit
	MaxMembers   int // max_members: group member cap
	LargeGroup   int // large_group: above this many members message.new has no body
	// edit_window, recall_window: chat.NoLimit for none.
	EditWindow, RecallWindow time.Duration
	MaxInflight              int   // max_inflight: outbound QoS 1 window per session
	DBMaxConns               int32 // db_max_conns: PostgreSQL pool size

	SendTimeout time.Duration // send_timeout: deadline of one send

	LogLevel  string // log_level: debug, info, warn or error
	LogFormat string // log_format: text or json
	Dev       bool   // dev: development mode

	// WSAllowedOrigins are extra browser origins (scheme://host[:port],
	// lower case) allowed to open WebSockets; same-origin is always allowed.
	WSAllowedOrigins []string

	LimitSendRate     float64 // limit_send_rate: messages per second per user, 0 = unlimited
	LimitSendBurst    int     // limit_send_burst: bucket size of that limit
	LimitConvRate     float64 // limit_conv_rate: messages per second per conversation, 0 = unlimited
	LimitConvBurst    int     // limit_conv_burst
	LimitReadRate     float64 // limit_read_rate: read receipt writes per second per user, 0 = unlimited
	LimitReadBurst    int     // limit_read_burst
	LimitTypingRate   float64 // limit_typing_rate: typing events per second per user, 0 = unlimited
	LimitTypingBurst  int     // limit_typing_burst
	LimitAPIRate      float64 // limit_api_rate: HTTP requests and RPC calls per second per user, 0 = unlimited
	LimitAPIBurst     int     // limit_api_burst
	LimitConnectRate  float64 // limit_connect_rate: MQTT connects per second per IP, 0 = unlimited
	LimitConnectBurst int     // limit_connect_burst
	// LimitConnectUserRate: authenticated MQTT connects per second per
	// user (limit_connect_user_rate), 0 = unlimited.
	LimitConnectUserRate  float64
	LimitConnectUserBurst int // limit_connect_user_burst
	// MaxConnectionsPerUser caps the MQTT connections (distinct client ids)
	// of one user (max_connections_per_user), 0 = no cap.
	MaxConnectionsPerUser int
	// MaxPendingConnectsPerIP caps the MQTT connections one client address
	// holds open without having sent their CONNECT
	// (max_pending_connects_per_ip), 0 = no cap.
	MaxPendingConnectsPerIP int
	// MaxIdleHTTPConnsPerIP caps the HTTP connections one client address
	// holds that serve no request, new or idle between two
	// (max_idle_http_connections_per_ip), 0 = no cap. A setting of its
	// own: it counts what a proxy's pool holds too, so an operator may
	// need it off while keeping the MQTT cap.
	MaxIdleHTTPConnsPerIP int
	// ConnectBudgetRate is how many CONNECTs per second the node handles
	// (connect_budget_rate), 0 = unlimited; ConnectBudgetQueue how many may
	// wait for it (connect_budget_queue).
	ConnectBudgetRate  float64
	ConnectBudgetQueue int
	// RedisURL shares the rate limits between nodes; "" keeps them local.
	RedisURL string

	PresencePush bool // presence_push: push presence events (false: query only)
	// PresenceGrace (presence_grace): a user offline this long is
	// announced offline; a reconnect within it is not announced at all.
	PresenceGrace time.Duration

	// CursorFlush (cursor_flush): how often persistent sessions' delivered
	// cursors are written; a node that dies without a clean shutdown
	// replays up to this long of acknowledged messages (duplicates, never
	// a loss).
	CursorFlush time.Duration
	// DeliveredFlush (delivered_flush): how often delivered watermarks are
	// written, the most the senders' delivered tick waits for it.
	DeliveredFlush time.Duration

	ShutdownTimeout time.Duration // shutdown_timeout: graceful shutdown budget

	OpsSettings
	PushSettings
	AttachmentSettings

	sources map[string]string // key -> where its value came from
}

// Source names where key's value came from: "default", "yaml FILE:LINE",
// "env CHAT_X" or "flag -x". Unknown keys return "".
func (s Settings) Source(key string) string {
	if _, ok := keyByName[key]; !ok {
		return ""
	}
	if src, ok := s.sources[key]; ok {
		return src
	}
	return "default"
}

// Limits returns the domain validation limits the settings describe.
func (s Settings) Limits() chat.Limits {
	return chat.Limits{MaxBodyBytes: s.MaxBodyBytes, MaxMembers: s.MaxMembers, EditWindow: s.EditWindow, RecallWindow: s.RecallWindow}
}

// RateLimits returns the rate limits the settings describe.
func (s Settings) RateLimits() chat.RateLimits {
	return chat.RateLimits{
		Send:        chat.RateLimit{Rate: s.LimitSendRate, Burst: s.LimitSendBurst},
		Conv:        chat.RateLimit{Rate: s.LimitConvRate, Burst: s.LimitConvBurst},
		Read:        chat.RateLimit{Rate: s.LimitReadRate, Burst: s.LimitReadBurst},
		Typing:      chat.RateLimit{Rate: s.LimitTypingRate, Burst: s.LimitTypingBurst},
		API:         chat.RateLimit{Rate: s.LimitAPIRate, Burst: s.LimitAPIBurst},
		Connect:     chat.RateLimit{Rate: s.LimitConnectRate, Burst: s.LimitConnectBurst},
		ConnectUser: chat.RateLimit{Rate: s.LimitConnectUserRate, Burst: s.LimitConnectUserBurst},
		Upload:      chat.RateLimit{Rate: s.LimitUploadRate, Burst: s.LimitUploadBurst},
	}
}

// SlogLevel returns LogLevel as a slog.Level.
func (s Settings) SlogLevel() slog.Level {
	switch s.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// Source kinds, as they appear in errors.
const (
	SourceDefault = "default"
	SourceYAML    = "yaml"
	SourceEnv     = "env"
	SourceFlag    = "flag"
)

// Error is a configuration error: which key, from where, what is wrong and
// what to do.
type Error struct {
	Key    string // YAML key, "" for errors not about one key
	Source string // "flag -x", "env CHAT_X", "yaml FILE:LINE", "default"
	Reason string // what is wrong
	Fix    string // what to do
	Err    error  // cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	if e.Source != "" {
		b.WriteString(" (from " + e.Source + ")")
	}
	b.WriteString(": " + e.Reason)
	if e.Fix != "" {
		b.WriteString("; " + e.Fix)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrVersion is wrapped by Load's error for -version: print the version
// and exit 0.
var ErrVersion = errors.New("version requested")

// EnvConfig names the variable that may name the YAML file.
const EnvConfig = "CHAT_CONFIG"

// Load resolves the settings from args (the command line without the program
// name), lookupenv (os.LookupEnv in production; MapEnv for a map) and the
// YAML file named by -config or CHAT_CONFIG. It reads nothing else from the
// process.
//
// A variable that is set counts, even when it is empty: CHAT_X= is the
// empty value, as x: "" is in the YAML file. It clears a text or list
// setting (an address turns its listener off, a URL is unset) and is an
// error for a setting that has no empty value (a number, a duration, a
// switch), not a silent fallback to the YAML value or the default.
func Load(args []string, lookupenv func(string) (string, bool)) (Settings, error) {
	if lookupenv == nil {
		lookupenv = func(string) (string, bool) { return "", false }
	}
	fs, flagVals, configFlag := newFlagSet()
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Settings{}, &Error{Reason: "help requested", Err: flag.ErrHelp}
		}
		return Settings{}, &Error{Source: "command line", Reason: err.Error(), Fix: "run chatd -help to list the flags", Err: err}
	}
	if *version {
		return Settings{}, &Error{Reason: "version requested", Err: ErrVersion}
	}
	if fs.NArg() > 0 {
		return Settings{}, &Error{Source: "command line", Reason: fmt.Sprintf("unexpected argument %q", fs.Arg(0)),
			Fix: "chatd takes only flags (-name value); run chatd -help to list them"}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	s := Settings{sources: map[string]string{}}
	for _, k := range keys {
		if err := k.apply(&s, k.def); err != nil {
			return Settings{}, fmt.Errorf("config: default of %s is invalid (a bug): %w", k.name, err)
		}
	}

	// YAML file.
	path, pathSrc := "", ""
	if set["config"] {
		path, pathSrc = *configFlag, "flag -config"
	} else if v, _ := lookupenv(EnvConfig); v != "" {
		path, pathSrc = v, "env "+EnvConfig
	}
	if path != "" {
		vals, err := readYAML(path, pathSrc)
		if err != nil {
			return Settings{}, err
		}
		s.ConfigFile = path
		for _, k := range keys {
			if v, ok := vals[k.name]; ok {
				if err := s.set(k, v.value, fmt.Sprintf("yaml %s:%d", path, v.line)); err != nil {
					return Settings{}, err
				}
			}
		}
	}

	// Environment.
	for _, k := range keys {
		if v, ok := lookupenv(k.env); ok {
			if err := s.set(k, v, "env "+k.env); err != nil {
				return Settings{}, err
			}
		}
	}

	// Flags.
	for _, k := range keys {
		if set[k.flag] {
			if err := s.set(k, flagVals[k.name].v, "flag -"+k.flag); err != nil {
				return Settings{}, err
			}
		}
	}

	if err := s.check(); err != nil {
		return Settings{}, err
	}
	if s.NodeID == "" {
		s.NodeID = defaultNodeID()
	}
	return s, nil
}

// MapEnv looks variables up in m, for Load: a key of m is set, even to
// "".
func MapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// set applies one value for k from src, recording the source.
func (s *Settings) set(k *key, raw, src string) error {
	if err := k.apply(s, raw); err != nil {
		e := &Error{Key: k.name, Source: src, Fix: k.fix}
		if raw == "" && strings.HasPrefix(src, "env ") {
			// Most often a variable meant to be unset (CHAT_X= in an
			// env file, ${X:-} in a compose file).
			e.Fix += fmt.Sprintf("; or unset %s (set but empty, it is the empty value, not unset)", k.env)
		}
		if k.secret {
			e.Reason = "invalid value (not shown: secret): " + err.Error()
		} else {
			e.Reason = fmt.Sprintf("invalid value %q: %v", raw, err)
		}
		return e
	}
	s.sources[k.name] = src
	return nil
}

// check validates combinations of keys.
func (s *Settings) check() error {
	if (s.TLSCert == "") != (s.TLSKey == "") {
		k, other := "tls_key", "tls_cert"
		if s.TLSCert == "" {
			k, other = "tls_cert", "tls_key"
		}
		return &Error{Key: k, Source: s.Source(other),
			Reason: fmt.Sprintf("%s is set but %s is not; they must be set together", other, k),
			Fix:    fmt.Sprintf("set %s (CHAT_%s) too, or unset %s to serve plain TCP/HTTP", k, strings.ToUpper(k), other)}
	}
	if err := s.checkOps(); err != nil {
		return err
	}
	if err := s.checkPush(); err != nil {
		return err
	}
	if err := s.checkAttachments(); err != nil {
		return err
	}
	if len(s.KafkaBrokers) > 0 && s.KafkaTopic == "" {
		return &Error{Key: "kafka_topic", Source: s.Source("kafka_topic"),
			Reason: "kafka_brokers is set but kafka_topic is empty",
			Fix:    "set kafka_topic (default chat.events) or unset kafka_brokers to run without Kafka"}
	}
	if len(s.KafkaBrokers) > 0 && s.PushKafkaTopic != "" && s.PushKafkaTopic == s.KafkaTopic {
		return &Error{Key: "push_kafka_topic", Source: s.Source("push_kafka_topic"),
			Reason: fmt.Sprintf("push_kafka_topic is %q, kafka_topic's topic: push requests (device tokens) would go into the event stream every node and downstream consumer reads", s.PushKafkaTopic),
			Fix:    "give push requests a topic of their own (default chat.push), or set push_kafka_topic to \"\" for none"}
	}
	return nil
}

func defaultNodeID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "chatd"
	}
	h = strings.Map(func(r rune) rune {
		if nodeIDRune(r) {
			return r
		}
		return '-'
	}, h)
	if len(h) > 100 {
		h = h[:100]
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// stringValue is a flag.Value holding the raw text; boolean makes -dev work
// without "=true".
type stringValue struct {
	v       string
	boolean bool
}

func (f *stringValue) String() string {
	if f == nil {
		return ""
	}
	return f.v
}
func (f *stringValue) Set(v string) error { f.v = v; return nil }
func (f *stringValue) IsBoolFlag() bool   { return f.boolean }

func newFlagSet() (*flag.FlagSet, map[string]*stringValue, *string) {
	fs := flag.NewFlagSet("chatd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	vals := map[string]*stringValue{}
	for _, k := range keys {
		v := &stringValue{v: k.def, boolean: k.boolean}
		vals[k.name] = v
		fs.Var(v, k.flag, k.help)
	}
	cfg := fs.String("config", "", "YAML config file (env "+EnvConfig+")")
	return fs, vals, cfg
}

// PrintUsage writes chatd's flags, their variables and defaults to w.
func PrintUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: chatd [flags]\n\nSettings come from flags, then CHAT_* environment variables, then the YAML file\nnamed by -config or %s, then defaults (see configs/chatd.yaml).\n\n", EnvConfig)
	fmt.Fprintf(w, "  -help, -h\n\tprint this help and exit\n  -version\n\tprint the version (module, VCS revision and time) and exit\n")
	fmt.Fprintf(w, "  -config PATH\n\tYAML config file (env %s)\n", EnvConfig)
	for _, k := range keys {
		arg := " VALUE"
		if k.boolean {
			arg = ""
		}
		def := k.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  -%s%s\n\t%s (env %s, yaml %s, default %s)\n", k.flag, arg, k.help, k.env, k.name, def)
	}
	fmt.Fprint(w, tracingUsage)
	fmt.Fprint(w, processUsage)
	fmt.Fprintf(w, "\nExample:\n  CHAT_DATA_DIR=/var/lib/chatd chatd -config /etc/chatd.yaml -mqtt-addr 0.0.0.0:1883\n")
}

// processUsage lists what cmd/chatd reads from the environment itself,
// outside the settings: the process's concerns, not the server's.
const processUsage = `
Process (environment only):
  CHAT_PPROF_ADDR
	serve net/http/pprof on this address, a listener of its own (operators only; never a public address)
  GODEBUG
	the Go runtime's settings; chatd adds adaptivestackstart=0 unless GODEBUG names it (smaller stacks per connection, docs/operations.md#connection-limits)
`

// tracingUsage lists the OpenTelemetry variables chatd honours. They are
// the standard ones, read from the environment only (no flags, no YAML),
// so that chatd is configured like every other traced service.
const tracingUsage = `
Tracing (OpenTelemetry, off by default; environment only, see docs/operations.md#tracing):
  OTEL_TRACES_EXPORTER
	otlp turns tracing on, none keeps it off (unset: on when an endpoint below is set)
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	the collector (default http://localhost:4318, grpc http://localhost:4317)
  OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
	http/protobuf (default) or grpc
  OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY, _INSECURE
	the exporter's connection (each also as OTEL_EXPORTER_OTLP_TRACES_...)
  OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG
	always_on, always_off, traceidratio, parentbased_always_on (default), parentbased_always_off, parentbased_traceidratio
  OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	service.name (default chatd) and more resource attributes
  OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE
	the batch span processor
  OTEL_SDK_DISABLED
	true turns tracing off whatever else is set
`

type yamlValue struct {
	value string
	line  int
}

// readYAML reads a flat mapping of known keys to scalars (lists allowed
// for list keys).
func readYAML(path, src string) (map[string]yamlValue, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Source: src, Reason: fmt.Sprintf("read config file: %v", err),
			Fix: "fix the path or unset -config / " + EnvConfig, Err: err}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]yamlValue{}, nil // empty file
		}
		return nil, &Error{Source: "yaml " + path, Reason: fmt.Sprintf("parse: %v", err), Fix: "fix the YAML syntax", Err: err}
	}
	// Only the first document would be read: keys after a "---" (two
	// files concatenated, overrides appended) must not be ignored unsaid.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Source: fmt.Sprintf("yaml %s:%d", path, next.Line), Reason: "the file holds more than one YAML document (a second begins here); only one would be read",
			Fix: "keep one document: remove the --- line and merge the keys (a key may appear once)"}
	case !errors.Is(err, io.EOF):
		return nil, &Error{Source: "yaml " + path, Reason: fmt.Sprintf("parse: %v", err), Fix: "fix the YAML syntax", Err: err}
	}
	if len(doc.Content) == 0 {
		return map[string]yamlValue{}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return map[string]yamlValue{}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Source: fmt.Sprintf("yaml %s:%d", path, root.Line),
			Reason: "the file must be a mapping of key: value", Fix: "see configs/chatd.yaml for the format"}
	}
	out := map[string]yamlValue{}
	// seen holds the keys given an empty value too, which out leaves out.
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("yaml %s:%d", path, kn.Line)
		name := kn.Value
		k, ok := keyByName[name]
		if !ok {
			fix := "remove it; configs/chatd.yaml lists every key"
			if s := suggest(name); s != "" {
				fix = fmt.Sprintf("did you mean %s? (configs/chatd.yaml lists every key)", s)
			}
			return nil, &Error{Key: name, Source: where, Reason: "unknown key", Fix: fix}
		}
		if seen[name] {
			return nil, &Error{Key: name, Source: where, Reason: "key appears twice", Fix: "keep one of them"}
		}
		seen[name] = true
		if vn.Kind == yaml.AliasNode && vn.Alias != nil {
			vn = vn.Alias
		}
		switch {
		case vn.Kind == yaml.ScalarNode && vn.Tag == "!!null":
			continue // "key:" with no value: keep the default
		case vn.Kind == yaml.ScalarNode:
			out[name] = yamlValue{value: vn.Value, line: vn.Line}
		case vn.Kind == yaml.SequenceNode && k.list:
			items := make([]string, 0, len(vn.Content))
			for _, it := range vn.Content {
				if it.Kind != yaml.ScalarNode {
					return nil, &Error{Key: name, Source: fmt.Sprintf("yaml %s:%d", path, it.Line),
						Reason: "list items must be plain strings", Fix: k.fix}
				}
				if strings.Contains(it.Value, ",") {
					return nil, &Error{Key: name, Source: fmt.Sprintf("yaml %s:%d", path, it.Line),
						Reason: fmt.Sprintf("list item %q contains a comma", it.Value), Fix: "put one value per item"}
				}
				items = append(items, it.Value)
			}
			out[name] = yamlValue{value: strings.Join(items, ","), line: vn.Line}
		default:
			want := "a single value"
			if k.list {
				want = "a comma-separated string or a list"
			}
			return nil, &Error{Key: name, Source: fmt.Sprintf("yaml %s:%d", path, vn.Line),
				Reason: "must be " + want, Fix: k.fix}
		}
	}
	return out, nil
}

// suggest returns the known key closest to name, if close enough.
func suggest(name string) string {
	best, bestD := "", 4
	for _, k := range keys {
		if d := distance(strings.ToLower(strings.ReplaceAll(name, "-", "_")), k.name); d < bestD {
			best, bestD = k.name, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Keys lists the YAML keys in documentation order.
func Keys() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}

// Redacted returns the settings keyed by YAML key for logging, with the JWT
// secret hidden and the database password masked.
func (s Settings) Redacted() map[string]any {
	m := map[string]any{
		"config_file":                 s.ConfigFile,
		"mqtt_addr":                   s.MQTTAddr,
		"http_addr":                   s.HTTPAddr,
		"database_url":                redactURL(s.DatabaseURL),
		"data_dir":                    s.DataDir,
		"jwt_secret":                  redactSecret(s.JWTSecret),
		"jwt_public_key":              s.JWTPublicKey,
		"kafka_brokers":               append([]string{}, s.KafkaBrokers...),
		"kafka_topic":                 s.KafkaTopic,
		"node_id":                     s.NodeID,
		"tls_cert":                    s.TLSCert,
		"tls_key":                     s.TLSKey,
		"max_body_bytes":              s.MaxBodyBytes,
		"max_members":                 s.MaxMembers,
		"large_group":                 s.LargeGroup,
		"edit_window":                 windowString(s.EditWindow),
		"recall_window":               windowString(s.RecallWindow),
		"max_inflight":                s.MaxInflight,
		"db_max_conns":                s.DBMaxConns,
		"send_timeout":                s.SendTimeout.String(),
		"log_level":                   s.LogLevel,
		"log_format":                  s.LogFormat,
		"dev":                         s.Dev,
		"ws_allowed_origins":          append([]string{}, s.WSAllowedOrigins...),
		"limit_send_rate":             s.LimitSendRate,
		"limit_send_burst":            s.LimitSendBurst,
		"limit_conv_rate":             s.LimitConvRate,
		"limit_conv_burst":            s.LimitConvBurst,
		"limit_read_rate":             s.LimitReadRate,
		"limit_read_burst":            s.LimitReadBurst,
		"limit_typing_rate":           s.LimitTypingRate,
		"limit_typing_burst":          s.LimitTypingBurst,
		"limit_api_rate":              s.LimitAPIRate,
		"limit_api_burst":             s.LimitAPIBurst,
		"limit_connect_rate":          s.LimitConnectRate,
		"limit_connect_burst":         s.LimitConnectBurst,
		"limit_connect_user_rate":     s.LimitConnectUserRate,
		"limit_connect_user_burst":    s.LimitConnectUserBurst,
		"max_connections_per_user":    s.MaxConnectionsPerUser,
		"max_pending_connects_per_ip": s.MaxPendingConnectsPerIP,
		"connect_budget_rate":         s.ConnectBudgetRate,
		"connect_budget_queue":        s.ConnectBudgetQueue,
		"redis_url":                   redactURL(s.RedisURL),
		"presence_push":               s.PresencePush,
		"presence_grace":              s.PresenceGrace.String(),
		"cursor_flush":                s.CursorFlush.String(),
		"delivered_flush":             s.DeliveredFlush.String(),
		"shutdown_timeout":            s.ShutdownTimeout.String(),

		"max_idle_http_connections_per_ip": s.MaxIdleHTTPConnsPerIP,
	}
	s.redactedOps(m)
	s.redactedPush(m)
	s.redactedAttachments(m)
	return m
}

// LogValue makes Settings log as its redacted form with slog.
func (s Settings) LogValue() slog.Value {
	r := s.Redacted()
	names := slices.Sorted(maps.Keys(r))
	attrs := make([]slog.Attr, 0, len(names))
	for _, k := range names {
		attrs = append(attrs, slog.Any(k, r[k]))
	}
	return slog.GroupValue(attrs...)
}

func windowString(d time.Duration) string {
	if d < 0 {
		return "0"
	}
	return d.String()
}

// ProcessEnv are the CHAT_ variables chatd reads that are not settings.
var ProcessEnv = []string{EnvConfig, "CHAT_PPROF_ADDR"}

// UnknownVar is a CHAT_ environment variable that is neither a setting
// nor in ProcessEnv: Load ignores it.
type UnknownVar struct {
	Name       string // CHAT_MAX_MEMBER
	DidYouMean string // the setting's variable it resembles (CHAT_MAX_MEMBERS), "" if none
}

// UnknownEnv lists the CHAT_ variables of environ ("KEY=value", as
// os.Environ returns it) that Load ignores, sorted by name, so that a
// misspelt one is reported instead of silently leaving its setting at the
// default. They are not errors: tools beside chatd (chatctl, scripts) may
// share the prefix.
func UnknownEnv(environ []string) []UnknownVar {
	seen := map[string]bool{}
	var out []UnknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CHAT_") || seen[name] || slices.Contains(ProcessEnv, name) {
			continue
		}
		seen[name] = true
		if _, ok := keyByName[strings.ToLower(strings.TrimPrefix(name, "CHAT_"))]; ok && name == strings.ToUpper(name) {
			continue
		}
		u := UnknownVar{Name: name}
		if s := suggest(strings.TrimPrefix(name, "CHAT_")); s != "" {
			u.DidYouMean = keyByName[s].env
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
