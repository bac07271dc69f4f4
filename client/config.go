package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config configures a Client. UserID, Brokers and Token (or TokenFunc) are
// required; everything else has a default.
type Config struct {
	// Brokers are chatd's MQTT addresses, tried in turn: mqtt://host:1883,
	// mqtts://host:8883, ws://host:8080/mqtt or wss://host/mqtt.
	Brokers []string
	// UserID is the user the token was minted for.
	UserID int64
	// Token is the JWT sent as the MQTT password. TokenFunc, when set, is
	// called before every connection attempt instead, so tokens can be
	// refreshed; an error from it fails that attempt. chatd ends a
	// connection when its token expires, so a client that stays connected
	// longer than a token lives needs TokenFunc. Once chatd refuses a
	// static Token (bad, expired, revoked), the client stops reconnecting:
	// Client.Err, an error event (code "unauthorized"), AwaitConnection,
	// requests and sends report ErrUnauthorized; unsent changes stay in
	// SessionDir, and a client made on it with a good token sends them.
	// With TokenFunc a refused token is retried with the next one; only
	// AwaitConnection's error, when its context ends, tells the refusal.
	Token     string
	TokenFunc func(ctx context.Context) (string, error)
	// TLS is used for mqtts:// and wss:// brokers (and https:// HTTPURL).
	TLS *tls.Config
	// HTTPURL is chatd's HTTP API, e.g. http://127.0.0.1:8080: uploads to
	// chatd's own store and downloads go there. Default: the first ws://
	// or wss:// broker's host (http, https). Not needed to send or receive
	// messages.
	HTTPURL string

	// ClientID is the MQTT client id, which names the server-side session.
	// Default: the id kept in SessionDir (created on first use), else a
	// random one. It may not contain '/', '+' or '#'. One client at a time
	// may use it: a client whose session other clients with the same id
	// take over 3 times within a minute stops (ErrTakenOver).
	ClientID string
	// SessionDir keeps the session on disk: the client id, the unacknowledged
	// sends (re-published with the same clientMsgId after a restart) and
	// paho's packet store. One process at a time may use a directory.
	// Empty keeps everything in memory.
	SessionDir string
	// Ephemeral asks for no server-side session (clean start, expiry 0): the
	// server forgets the client on disconnect and replays nothing. The
	// client still fills what it missed through history after reconnecting.
	// A client without SessionDir and ClientID is always ephemeral.
	Ephemeral bool
	// SessionExpiry is how long the server keeps a persistent session after
	// a disconnect (default 24h).
	SessionExpiry time.Duration
	// KeepAlive is the MQTT keepalive (default 30s; use 30-60s on cellular).
	KeepAlive time.Duration

	// Positions are the highest seq per conversation the application already
	// has (persisted from Event.Seq). The client starts each listed
	// conversation there and fetches anything newer through history after
	// connecting. Conversations not listed start at the first event seen.
	Positions map[int64]int64

	// ReadDebounce is how long MarkRead collects receipts before publishing
	// the highest seq per conversation (default 1s).
	ReadDebounce time.Duration
	// RequestTimeout bounds one RPC when the caller's context has no
	// deadline (default 15s).
	RequestTimeout time.Duration
	// AckTimeout bounds the wait for one PUBACK before a send is
	// re-published with the same clientMsgId (default 30s).
	AckTimeout time.Duration
	// MaxReconnectDelay caps the exponential reconnect backoff (default
	// 30s); a refusing CONNACK's retryAfter is honoured beyond it.
	MaxReconnectDelay time.Duration
	// EventBuffer is the capacity of the Events channel (default 256).
	EventBuffer int

	// Logger receives connection changes and background failures
	// (default: discard).
	Logger *slog.Logger
}

// settings is Config resolved.
type settings struct {
	Config
	brokers    []*url.URL
	persistent bool
}

func (c Config) resolve() (*settings, error) {
	s := &settings{Config: c}
	if c.UserID <= 0 {
		return nil, errors.New("client config: UserID must be a positive user id")
	}
	if c.Token == "" && c.TokenFunc == nil {
		return nil, errors.New("client config: Token or TokenFunc is required (mint one with `chatctl token --user N`)")
	}
	if len(c.Brokers) == 0 {
		return nil, errors.New("client config: Brokers is empty; give chatd's address such as mqtt://127.0.0.1:1883")
	}
	for _, b := range c.Brokers {
		u, err := parseBroker(b)
		if err != nil {
			return nil, err
		}
		s.brokers = append(s.brokers, u)
	}
	if c.ClientID == "" && c.SessionDir != "" {
		id, err := loadClientID(c.SessionDir, c.UserID)
		if err != nil {
			return nil, err
		}
		s.ClientID = id
	}
	if s.HTTPURL == "" {
		for _, b := range s.brokers {
			if b.Scheme == "ws" || b.Scheme == "wss" {
				s.HTTPURL = strings.Replace(b.Scheme, "ws", "http", 1) + "://" + b.Host
				break
			}
		}
	}
	s.HTTPURL = strings.TrimSuffix(s.HTTPURL, "/")
	s.persistent = !c.Ephemeral && s.ClientID != ""
	if s.ClientID == "" {
		s.ClientID = newClientID(c.UserID)
	}
	if strings.ContainsAny(s.ClientID, "/+#\x00") || len(s.ClientID) > 128 {
		return nil, fmt.Errorf("client config: ClientID %q must be at most 128 bytes without '/', '+', '#'", s.ClientID)
	}
	if s.SessionExpiry <= 0 {
		s.SessionExpiry = 24 * time.Hour
	}
	if s.KeepAlive <= 0 {
		s.KeepAlive = 30 * time.Second
	}
	if s.ReadDebounce <= 0 {
		s.ReadDebounce = time.Second
	}
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = 15 * time.Second
	}
	if s.AckTimeout <= 0 {
		s.AckTimeout = 30 * time.Second
	}
	if s.MaxReconnectDelay <= 0 {
		s.MaxReconnectDelay = 30 * time.Second
	}
	if s.EventBuffer <= 0 {
		s.EventBuffer = 256
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// parseBroker accepts mqtt, mqtts, tcp, tls, ws and wss URLs; a bare
// host:port means mqtt://host:port.
func parseBroker(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		raw = "mqtt://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("client config: broker %q: %w", raw, err)
	}
	switch u.Scheme {
	case "mqtt", "tcp", "mqtts", "tls", "ssl", "ws", "wss":
	default:
		return nil, fmt.Errorf("client config: broker %q: scheme must be mqtt, mqtts, ws or wss", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("client config: broker %q has no host", raw)
	}
	return u, nil
}

func newClientID(user int64) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return fmt.Sprintf("chatc-%d-%s", user, hex.EncodeToString(b))
}

// loadClientID reads SessionDir/client-id, creating it on first use. A
// directory used by another user is refused: its session belongs to them.
func loadClientID(dir string, user int64) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create session dir: %w", err)
	}
	path := filepath.Join(dir, "client-id")
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if want := fmt.Sprintf("chatc-%d-", user); strings.HasPrefix(id, "chatc-") && !strings.HasPrefix(id, want) {
			return "", fmt.Errorf("session dir %s belongs to another user (client id %s); use one directory per user", dir, id)
		}
		if id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read client id: %w", err)
	}
	id := newClientID(user)
	if err := writeFileSync(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("write client id: %w", err)
	}
	return id, nil
}

// writeFileSync writes a file durably: temp file, fsync, rename, fsync dir.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
