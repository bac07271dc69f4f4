package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/auth"
)

// chatFlags are the flags of the commands that talk to chatd as a user
// over MQTT (send, forward, edit, recall, react, tail, inbox, history,
// read, and the people and group commands), with the flag set they belong
// to, which names the command in errors.
type chatFlags struct {
	fs      *flag.FlagSet
	broker  *string
	user    *int64
	token   *string
	secret  *string
	dataDir *string
	timeout *time.Duration
	json    *bool
	// renewToken: the command may outlive a token (tail), so one minted
	// by chatctl is minted again for every connection.
	renewToken bool
	// long: the command may rightly run longer than --timeout, as it
	// follows events until Ctrl-C (tail) or moves a file's bytes (uploads,
	// downloads). --timeout then bounds connecting and each request to
	// chatd rather than the whole run.
	long bool
}

// newChatFlags makes the flag set of a command acting as a user (see
// newFlags) with the chat flags added.
func newChatFlags(name, usage, about string, examples ...string) chatFlags {
	return addChatFlags(newFlags(name, usage, about, examples...))
}

// parse parses the command line (see parse).
func (f chatFlags) parse(a *app, args []string) error { return parse(a, f.fs, args) }

// parseConversation is parse, then checks the required --conversation.
func (f chatFlags) parseConversation(a *app, args []string, conv *int64) error {
	if err := f.parse(a, args); err != nil {
		return err
	}
	return requireID(f.fs, "conversation", *conv, "the conversation id")
}

// explain is explainChat for --user in conversation conv (0: none).
func (f chatFlags) explain(err error, conv int64) error {
	return explainChat(err, f.fs, *f.user, conv)
}

// with runs fn with a client connected as connect does and closes it
// after. The context fn gets ends --timeout after the command started
// (unless f.long): a user who says how long to wait for chatd means the
// whole command, however many requests it makes.
func (f chatFlags) with(ctx context.Context, a *app, fn func(context.Context, *client.Client) error, opts ...func(*client.Config)) error {
	if *f.timeout <= 0 {
		// It bounds connecting, and every request; none could be made.
		return usagef("%s: --timeout must be positive, e.g. --timeout 10s", f.fs.Name())
	}
	if !f.long {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *f.timeout)
		defer cancel()
	}
	c, closeFn, err := f.connect(ctx, a, opts...)
	if err != nil {
		return err
	}
	defer closeFn()
	return fn(ctx, c)
}

// openPeer points *conv at the direct conversation of --user with peer
// (opening it if needed) when a command was given --peer instead of
// --conversation; with peer 0 it leaves *conv as it is.
func (f chatFlags) openPeer(ctx context.Context, c *client.Client, conv *int64, peer int64) error {
	if peer == 0 {
		return nil
	}
	d, _, err := c.OpenDirect(ctx, peer)
	if err != nil {
		return f.explain(err, 0)
	}
	*conv = d.ID
	return nil
}

func addChatFlags(fs *flag.FlagSet) chatFlags {
	return chatFlags{
		fs:      fs,
		broker:  fs.String("broker", "", "chatd MQTT address, mqtt://host:port or ws://host:port/mqtt (default mqtt://$CHAT_MQTT_ADDR; with it off, ws://$CHAT_HTTP_ADDR/mqtt)"),
		user:    fs.Int64("user", 0, "act as this user id"),
		token:   fs.String("token", "", "JWT for --user (default: minted like \"chatctl token\" does, from --secret, $CHAT_JWT_SECRET or <data dir>/jwt.secret)"),
		secret:  fs.String("secret", "", "HS256 secret to mint the token with (default $CHAT_JWT_SECRET, else <data dir>/jwt.secret)"),
		dataDir: fs.String("data-dir", "", "chatd data dir holding jwt.secret (default $CHAT_DATA_DIR, else ./data)"),
		timeout: fs.Duration("timeout", 10*time.Second, "how long to wait for chatd: the whole command gives up after it (tail, download and file uploads: connecting and each request do)"),
		json:    fs.Bool("json", false, "print JSON instead of text"),
	}
}

// brokerURL resolves --broker: the flag, else chatd's plain MQTT
// listener, else its MQTT over WebSocket on http_addr. chatd's TLS
// listeners are not guessed at: their certificate names the host
// clients know it by, not the address it listens on, so the operator
// passes that name.
func (f chatFlags) brokerURL(a *app) (string, error) {
	s := a.settings
	switch {
	case *f.broker != "":
		return *f.broker, nil
	case s.MQTTAddr != "":
		return "mqtt://" + localAddr(s.MQTTAddr), nil
	case s.HTTPAddr != "":
		return "ws://" + localAddr(s.HTTPAddr) + "/mqtt", nil
	}
	var tls []string
	if _, port, err := net.SplitHostPort(s.MQTTSAddr); err == nil {
		tls = append(tls, "mqtts://HOST:"+port)
	}
	if _, port, err := net.SplitHostPort(s.HTTPSAddr); err == nil {
		tls = append(tls, "wss://HOST:"+port+"/mqtt")
	}
	pass := "pass --broker mqtt://HOST:PORT naming a chatd"
	if len(tls) > 0 {
		pass = "pass --broker " + strings.Join(tls, " or ") + ", HOST a name chatd's certificate holds"
	}
	return "", usagef("%s: chatd's mqtt_addr (from %s) and http_addr (from %s) are off, so chatctl has no plain listener of chatd's to connect to; %s",
		f.fs.Name(), s.Source("mqtt_addr"), s.Source("http_addr"), pass)
}

// localAddr is a listen address of this machine's chatd to dial: a
// wildcard host means this machine.
func localAddr(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// connect opens an ephemeral client for --user and waits for chatd; its
// errors say what to do next.
func (f chatFlags) connect(ctx context.Context, a *app, opts ...func(*client.Config)) (*client.Client, func(), error) {
	if err := requireID(f.fs, "user", *f.user, "the user to act as"); err != nil {
		return nil, nil, err
	}
	broker, err := f.brokerURL(a)
	if err != nil {
		return nil, nil, err
	}
	tok := *f.token
	var renew func(context.Context) (string, error)
	if tok == "" {
		secret, err := a.jwtSecret(f.fs.Name(), *f.secret, *f.dataDir)
		if err != nil {
			return nil, nil, fmt.Errorf("%w\n(or pass a token with --token \"$(chatctl token --user %d)\")", err, *f.user)
		}
		if tok, err = a.mintToken(secret, *f.user); err != nil {
			return nil, nil, err
		}
		if f.renewToken {
			// chatd ends a connection when its token expires; the
			// client then reconnects with a new one. The first
			// connection uses the token just minted.
			first := tok
			var used atomic.Bool
			renew = func(context.Context) (string, error) {
				if !used.Swap(true) {
					return first, nil
				}
				return a.mintToken(secret, *f.user)
			}
		}
	}
	// The client's connection chatter is noise for a command; debug shows it.
	level := slog.LevelWarn
	if a.settings.SlogLevel() == slog.LevelDebug {
		level = slog.LevelDebug
	}
	var clientLog slog.Handler = slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})
	if a.settings.LogFormat == "json" {
		clientLog = slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: level})
	}
	cfg := client.Config{
		Brokers:   []string{broker},
		UserID:    *f.user,
		Token:     tok,
		TokenFunc: renew,
		Ephemeral: true,
		Logger:    slog.New(clientLog),
		// Bounds the requests of a long command (whose context has no
		// deadline), and the client's own (history fills).
		RequestTimeout: *f.timeout,
	}
	if renew != nil {
		cfg.Token = ""
	}
	for _, o := range opts {
		o(&cfg)
	}
	return f.dial(ctx, cfg)
}

// dial makes a client of cfg and waits for its connection; its errors
// say what to do next.
func (f chatFlags) dial(ctx context.Context, cfg client.Config) (*client.Client, func(), error) {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, nil, usagef("%s: %v", f.fs.Name(), err)
	}
	closeFn := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	}
	// A refused connection after a couple of quick retries means chatd is
	// not running, and a refused token (a renewing client's first one
	// included: the client goes on trying) a wrong secret: say so at once
	// instead of waiting out --timeout.
	quick, cancelQuick := context.WithTimeout(ctx, min(1500*time.Millisecond, *f.timeout))
	err = c.AwaitConnection(quick)
	cancelQuick()
	if err != nil && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, client.ErrUnauthorized) {
		wait, cancel := context.WithTimeout(ctx, *f.timeout)
		defer cancel()
		err = c.AwaitConnection(wait)
	}
	if err != nil {
		closeFn()
		return nil, nil, explainConnect(err, cfg.Brokers[0], cfg.UserID, *f.timeout)
	}
	return c, closeFn, nil
}

// storeWithin runs store, a change sent under client message id id,
// bounded by --timeout: the client retries a change chatd answers
// "unavailable" until its context ends, and chatctl's client keeps
// nothing once the command exits, so a change not acknowledged by then
// says how to retry it without a duplicate.
func (f chatFlags) storeWithin(ctx context.Context, id string, store func(context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, *f.timeout)
	defer cancel()
	err := store(sctx)
	if errors.Is(err, client.ErrQueued) && !errors.Is(ctx.Err(), context.Canceled) {
		return hint(err, "chatd did not acknowledge it within --timeout %v (%v): it may or may not be stored; run the command again with --client-msg-id %s to retry without a duplicate, or raise --timeout",
			*f.timeout, err, id)
	}
	return err
}

// commandTokenTTL is how long a token chatctl mints for a command lives.
const commandTokenTTL = time.Hour

// mintToken mints a token for user's connection with secret (a.mint in
// tests).
func (a *app) mintToken(secret []byte, user int64) (string, error) {
	mint := a.mint
	if mint == nil {
		mint = func(secret []byte, user int64) (string, error) { return auth.Mint(secret, user, commandTokenTTL) }
	}
	tok, err := mint(secret, user)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return tok, nil
}

// explainConnect says why chatd could not be reached and what to do.
func explainConnect(err error, broker string, user int64, timeout time.Duration) error {
	switch {
	case errors.Is(err, client.ErrUnauthorized):
		return hint(err, "chatd at %s refused the token for user %d: it was not signed with chatd's secret or has expired; run chatctl from the directory chatd runs in (it reads ./data/jwt.secret), or pass --data-dir DIR, --secret or --token", broker, user)
	case errors.Is(err, syscall.ECONNREFUSED):
		return hint(err, "cannot reach chatd at %s (connection refused): is chatd running? start it with `go run ./cmd/chatd`, or point --broker (or CHAT_MQTT_ADDR) at it", broker)
	case errors.Is(err, context.Canceled):
		return err
	default:
		return hint(err, "could not connect to chatd at %s within %v (%v): is chatd running and reachable? start it with `go run ./cmd/chatd`, or raise --timeout", broker, timeout, err)
	}
}

// explainChat turns a refusal of a chat command into what to do next.
func explainChat(err error, fs *flag.FlagSet, user, conv int64) error {
	switch {
	case errors.Is(err, client.ErrNotMember), errors.Is(err, client.ErrNotFound) && conv != 0:
		return hint(err, "user %d is not a member of conversation %d, or it does not exist: list the user's conversations with `chatctl inbox --user %d`, or add them with `chatctl conversation add --conversation %d --actor OWNER --user %d`",
			user, conv, user, conv, user)
	case errors.Is(err, client.ErrInvalid):
		return hint(err, "%v; see `chatctl %s --help`", err, fs.Name())
	case errors.Is(err, client.ErrRateLimited):
		// A request (an RPC, Status set) spends the API bucket; a
		// refused publish is a send over the send limits.
		limit := "limit_send_rate (CHAT_LIMIT_SEND_RATE)"
		if e := (*client.Error)(nil); errors.As(err, &e) && e.Status != 0 {
			limit = "limit_api_rate (CHAT_LIMIT_API_RATE)"
		}
		return hint(err, "%v: slow down, or raise %s for chatd", err, limit)
	case errors.Is(err, client.ErrUnavailable) && errors.Is(err, context.DeadlineExceeded):
		return hint(err, "chatd did not answer within --timeout %v (%v): chatd or its database is overloaded or stuck; retry in a moment, or raise --timeout", fs.Lookup("timeout").Value, err)
	case errors.Is(err, client.ErrUnavailable):
		return hint(err, "%v: chatd or its database is unavailable; retry in a moment", err)
	}
	return fmt.Errorf("%s: %w", fs.Name(), err)
}
