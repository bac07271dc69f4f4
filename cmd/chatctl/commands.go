package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/buildinfo"
	"github.com/chatd/chatd/internal/pgembed"
)

// app is what a command gets from the process: its output streams and
// environment. Tests build their own.
type app struct {
	stdout, stderr io.Writer
	stdinR         io.Reader // nil: empty
	lookupenv      func(string) (string, bool)
	environ        []string // "KEY=value", the whole environment, for the unknown-variable warning

	settings config.Settings
	logger   *slog.Logger
	// mint mints the tokens of the commands that connect as a user
	// (nil: auth.Mint for commandTokenTTL); tests shorten their life.
	mint func(secret []byte, user int64) (string, error)
}

// stdin is the command's standard input (empty when none was given).
func (a *app) stdin() io.Reader {
	if a.stdinR == nil {
		return strings.NewReader("")
	}
	return a.stdinR
}

// command is one entry of a command table.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, a *app, args []string) error
}

// subcommands is a command with subcommands ("chatctl <name> <sub>"):
// its table and the parts of its usage around the list of subcommands.
type subcommands struct {
	name    string    // "conversation"
	usage   string    // the usage line and intro, before "Subcommands:"
	example string    // after "Example:"
	cmds    []command // the subcommands, in help order
}

// run runs the subcommand args[0] names with the rest of args; help
// prints the usage to stdout, no or an unknown subcommand to stderr.
func (s subcommands) run(ctx context.Context, a *app, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "%s\nSubcommands:\n", s.usage)
		for _, c := range s.cmds {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
		fmt.Fprintf(w, "\nRun \"chatctl %s <subcommand> --help\" for its flags.\n\nExample:\n  %s\n", s.name, s.example)
	}
	if len(args) == 0 {
		usage(a.stderr)
		return usagef("%s: a subcommand is required", s.name)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(a.stdout)
		return errHelp
	}
	for _, c := range s.cmds {
		if c.name == args[0] {
			return c.run(ctx, a, args[1:])
		}
	}
	usage(a.stderr)
	return usagef("%s: unknown subcommand %q", s.name, args[0])
}

// commands is the top-level command table, in help order.
var commands = []command{
	{"migrate", "apply pending database migrations", runMigrate},
	{"token", "mint a JWT for a user", runToken},
	{"revoke-tokens", "sign a user out everywhere: refuse the tokens and device certificates issued until now", runRevokeTokens},
	{"conversation", "create conversations and manage members (create, direct, add, remove, show)", runConversation},
	{"send", "send a message as a user (over MQTT, like a client); --reply-to quotes one", runSend},
	{"forward", "forward a message into another conversation", runForward},
	{"edit", "edit one of your messages", runEdit},
	{"recall", "recall a message for everyone (\"delete for everyone\")", runRecall},
	{"react", "set or remove a reaction (emoji) on a message", runReact},
	{"tail", "follow a user's events: [conv 3 #42] user 1: hello", runTail},
	{"inbox", "list a user's conversations with unread counts", runInbox},
	{"history", "print a conversation's messages", runHistory},
	{"read", "mark a conversation read up to a message", runRead},
	{"profile", "show or set a user's profile; show others' (--of)", runProfile},
	{"settings", "show or change a user's privacy settings (read receipts, presence)", runSettings},
	{"block", "block or unblock a user, or list the blocked", runBlock},
	{"group", "manage a group as a member: update, members, add, remove, role, owner", runGroup},
	{"search", "search the messages a user may read", runSearch},
	{"download", "download an attachment as a user (over HTTP)", runDownload},
}

// errHelp: usage was printed on request; exit 0.
var errHelp = errors.New("help requested")

// usageError: the command line is wrong; exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, a *app) int {
	if a.lookupenv == nil {
		a.lookupenv = func(string) (string, bool) { return "", false }
	}
	if len(args) == 0 {
		printUsage(a.stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			// "chatctl help migrate" == "chatctl migrate --help", and
			// "chatctl help conversation add" == "chatctl conversation add --help"
			return run(ctx, append(slices.Clone(args[1:]), "--help"), a)
		}
		printUsage(a.stdout)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(a.stdout, "chatctl", buildinfo.Get())
		return 0
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(a.stderr, "chatctl: unknown command %q\n\n", args[0])
		printUsage(a.stderr)
		return 2
	}
	return exitCode(a, cmd.run(ctx, a, args[1:]))
}

// exitCode is 2 for a usage error and for a setting that does not load,
// as chatd's exit status is for the latter (a supervisor need not retry
// either), 1 for any other failure.
func exitCode(a *app, err error) int {
	var ue *usageError
	var ce *config.Error
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue), errors.As(err, &ce):
		fmt.Fprintf(a.stderr, "chatctl: %v\n", err)
		return 2
	default:
		fmt.Fprintf(a.stderr, "chatctl: %v\n", err)
		return 1
	}
}

// init reads chatd's settings (env and CHAT_CONFIG file; chatctl's own
// flags come later) and sets up logging to stderr.
func (a *app) init() error {
	s, err := config.Load(nil, a.lookupenv)
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	a.settings = s
	var h slog.Handler
	opts := &slog.HandlerOptions{Level: s.SlogLevel()}
	if s.LogFormat == "json" {
		h = slog.NewJSONHandler(a.stderr, opts)
	} else {
		h = slog.NewTextHandler(a.stderr, opts)
	}
	a.logger = slog.New(h)
	// A mistyped variable (CHAT_DATABSE_URL) would otherwise leave the
	// command on its default, the embedded database in ./data, silently.
	for _, u := range config.UnknownEnv(a.environ) {
		if u.DidYouMean != "" {
			a.logger.Warn("unknown environment variable ignored", "var", u.Name, "did_you_mean", u.DidYouMean)
		} else {
			a.logger.Warn("unknown environment variable ignored", "var", u.Name)
		}
	}
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "chatctl operates a chatd deployment.\n\nUsage: chatctl <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Run "chatctl <command> --help" for its flags and an example, and
"chatctl --version" for the version (module, VCS revision and time).

Defaults come from chatd's settings: CHAT_DATABASE_URL (empty: the embedded
PostgreSQL in CHAT_DATA_DIR, default ./data), CHAT_JWT_SECRET, CHAT_CONFIG.
%s
`, wrap(strings.Join(userCommands[:len(userCommands)-1], ", ")+" and "+userCommands[len(userCommands)-1]+
		` talk to a running chatd as a user, over MQTT (CHAT_MQTT_ADDR, default 127.0.0.1:1883; with it off, over WebSocket on CHAT_HTTP_ADDR; files over its HTTP API, CHAT_HTTP_ADDR, else the host of a ws:// or wss:// --broker, else pass --http) with a token minted like "token"; migrate, revoke-tokens and conversation work on the database itself.`, 76))
}

// userCommands are the commands that act as a user through a running
// chatd (the chat flags: --broker, --user, --token), in help order.
var userCommands = []string{"send", "forward", "edit", "recall", "react", "tail", "inbox", "history", "read",
	"profile", "settings", "block", "group", "search", "download"}

// wrap breaks s into lines of at most width characters at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// newFlags makes a command's flag set. name is the command ("group
// update"): the flag set's name, which prefixes the command's errors
// (exitCode adds "chatctl: " before it). usage is the synopsis after
// "chatctl", about says what it does, example is a working command line.
func newFlags(name, usage, about string, examples ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: chatctl %s\n\n%s\n\nFlags:\n", usage, about)
		fs.SetOutput(out)
		fs.PrintDefaults()
		fmt.Fprintf(out, "\nExample:\n")
		for _, e := range examples {
			fmt.Fprintf(out, "  %s\n", e)
		}
	}
	return fs
}

// parse parses args; -help prints the usage to stdout, errors print it to
// stderr. Positional arguments are refused. Then it loads chatd's settings
// (so -help works even when they are broken).
func parse(a *app, fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(a.stdout)
		fs.Usage()
		return errHelp
	case err != nil:
		fs.SetOutput(a.stderr)
		fs.Usage()
		fs.SetOutput(io.Discard)
		return usagef("%s: %v", fs.Name(), err)
	case fs.NArg() > 0:
		fs.SetOutput(a.stderr)
		fs.Usage()
		fs.SetOutput(io.Discard)
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return a.init()
}

// dbFlags are the flags of every command that talks to the database.
type dbFlags struct {
	url, dataDir *string
	// create lets open initdb an embedded cluster where there is none
	// ("migrate" only): for any other command a data dir without one is
	// a wrong data dir, and a fresh empty database would only mislead.
	create bool
}

func addDBFlags(fs *flag.FlagSet) dbFlags {
	return dbFlags{
		url:     fs.String("database-url", "", "PostgreSQL URL (default $CHAT_DATABASE_URL; empty: the embedded cluster in --data-dir)"),
		dataDir: fs.String("data-dir", "", "chatd data dir holding the embedded cluster (default $CHAT_DATA_DIR, else ./data)"),
	}
}

// open connects the way chatd does: the URL, else the embedded cluster
// (joining chatd's running one if there is one).
func (d dbFlags) open(ctx context.Context, a *app) (*pgxpool.Pool, func(context.Context) error, error) {
	url, dir := *d.url, *d.dataDir
	if url == "" {
		url = a.settings.DatabaseURL
	}
	if dir == "" {
		dir = a.settings.DataDir
	}
	if url == "" && !d.create {
		if _, err := os.Stat(filepath.Join(pgembed.PGDir(dir), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("no embedded database in %s (%s has no PostgreSQL cluster): pass the data dir chatd runs with (--data-dir, CHAT_DATA_DIR) or --database-url / CHAT_DATABASE_URL, or create it with chatctl migrate (chatd creates it on its first start)", dir, pgembed.PGDir(dir))
		}
	}
	pool, closeDB, err := pgembed.Open(ctx, url, dir, 4, a.logger)
	if err != nil {
		return nil, nil, err
	}
	return pool, func(ctx context.Context) error {
		err := closeDB(ctx)
		if err != nil {
			a.logger.Warn("close database", "err", err)
		}
		return err
	}, nil
}

// requireID checks a required positive id flag.
func requireID(fs *flag.FlagSet, name string, v int64, what string) error {
	if v <= 0 {
		return usagef("%s: --%s is required: %s (a positive integer), e.g. --%s 1", fs.Name(), name, what, name)
	}
	return nil
}

// optionalIDs checks optional id flags: one given must be positive. Left
// out, such a flag widens the command (every conversation, every sender),
// and chatd reads an id of 0 as left out: "--conversation 0" would do
// more than asked.
func optionalIDs(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil || !slices.Contains(names, f.Name) {
			return
		}
		if v, perr := strconv.ParseInt(f.Value.String(), 10, 64); perr == nil && v <= 0 {
			err = usagef("%s: --%s must be a positive id, not %d (leave it out for all)", fs.Name(), f.Name, v)
		}
	})
	return err
}

// noNegativeIDs checks id flags that say where to: one given below zero
// is refused before connecting (0 is "not given").
func noNegativeIDs(fs *flag.FlagSet, ids ...required) error {
	for _, r := range ids {
		if r.v < 0 {
			return usagef("%s: --%s must be a positive id: %s, not %d", fs.Name(), r.name, r.what, r.v)
		}
	}
	return nil
}

// required is a required positive id flag: its name, value and what it is.
type required struct {
	name string
	v    int64
	what string
}

// requireIDs checks required id flags with requireID, in order.
func requireIDs(fs *flag.FlagSet, ids ...required) error {
	for _, r := range ids {
		if err := requireID(fs, r.name, r.v, r.what); err != nil {
			return err
		}
	}
	return nil
}

// parseIDs parses "2,3,4", the value of fs's flag flagName.
func parseIDs(fs *flag.FlagSet, flagName, s string) ([]int64, error) {
	out := []int64{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, usagef("%s: --%s: %q is not a user id; give comma-separated positive ids like 2,3,4", fs.Name(), flagName, p)
		}
		out = append(out, id)
	}
	return out, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// joinIDs lists ids ascending, the first 10 only.
func joinIDs(ids []int64) string {
	s := append([]int64(nil), ids...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	parts := []string{}
	for i, id := range s {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("... (%d in all)", len(s)))
			break
		}
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	return strings.Join(parts, ", ")
}
