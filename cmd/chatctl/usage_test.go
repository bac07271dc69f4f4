package main

import (
	"slices"
	"strings"
	"testing"
)

// TestAUsageErrorNamesChatctlOnce: a usage error's line is
// "chatctl: <command>: <what is wrong>", with the program's name once.
// The flag sets were named "chatctl <command>" and exitCode adds
// "chatctl: " too, so the line read "chatctl: chatctl token: ...". Every
// usage error exits 2, from the flag parser or a command's own checks.
func TestAUsageErrorNamesChatctlOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token"}, "chatctl: token: --user is required"},
		{[]string{"token", "--nope"}, "chatctl: token: flag provided but not defined: -nope"},
		{[]string{"token", "--user", "1", "extra"}, `chatctl: token: unexpected argument "extra"`},
		{[]string{"revoke-tokens"}, "chatctl: revoke-tokens: --user is required"},
		{[]string{"conversation", "add"}, "chatctl: conversation add: --conversation is required"},
		{[]string{"group", "role", "--user", "1", "--conversation", "2"}, "chatctl: group role: --member is required"},
		{[]string{"search", "--user", "1"}, "chatctl: search: --query is required"},
		{[]string{"group"}, "chatctl: group: a subcommand is required"},
	} {
		r := chatctl(t, nil, c.args...)
		wantFail(t, r, 2, c.want)
		if strings.Contains(r.stderr, "chatctl: chatctl") {
			t.Errorf("%v: the program is named twice:\n%s", c.args, r.stderr)
		}
	}
}

// TestAnOptionalIDGivenMustBePositive: an optional id flag left out
// widens a command (search every conversation, list instead of block),
// and chatd reads an id of 0 as left out. Given as 0, "search
// --conversation 0" searched every conversation of the user, and a
// negative id went to chatd to be refused (exit 1, as a failure of
// chatd's). Each is a usage error now, before connecting, as is a
// negative --limit.
func TestAnOptionalIDGivenMustBePositive(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"search", "--user", "1", "--query", "x", "--conversation", "0"}, "chatctl: search: --conversation must be a positive id"},
		{[]string{"search", "--user", "1", "--query", "x", "--sender", "-2"}, "chatctl: search: --sender must be a positive id"},
		{[]string{"search", "--user", "1", "--query", "x", "--limit", "-1"}, "chatctl: search: --limit must not be negative"},
		{[]string{"block", "--user", "1", "--peer", "0"}, "chatctl: block: --peer must be a positive id"},
		{[]string{"tail", "--user", "1", "--conversation", "-3"}, "chatctl: tail: --conversation must be a positive id"},
	} {
		// No chatd runs: a command that went on to connect would fail
		// with exit 1, not 2.
		wantFail(t, chatctl(t, map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:1"}, c.args...), 2, c.want)
	}
}

// TestTheHelpNamesEveryCommandThatActsAsAUser: chatctl --help said which
// commands talk to a running chatd as a user (and so take --broker and
// --user, not --database-url), but listed only the messaging ones: the
// profile, settings, block, group, search and download commands, which
// do too, read as database commands. The list is each command whose
// flags are the chat flags, and the others are not on it.
func TestTheHelpNamesEveryCommandThatActsAsAUser(t *testing.T) {
	top := mustOK(t, chatctl(t, nil, "--help")).stdout
	i := strings.Index(top, "CHAT_CONFIG.\n")
	if i < 0 {
		t.Fatalf("help has no paragraph on the settings:\n%s", top)
	}
	said := strings.Fields(strings.NewReplacer(",", " ", "\n", " ").Replace(top[i:]))
	for _, c := range commands {
		args := []string{c.name, "--help"}
		if c.name == "group" || c.name == "conversation" {
			args = []string{c.name, "add", "--help"} // every subcommand has the same kind of flags
		}
		if c.name == "migrate" {
			args = []string{"migrate", "--help"}
		}
		asUser := strings.Contains(mustOK(t, chatctl(t, nil, args...)).stdout, "-broker")
		if asUser != slices.Contains(userCommands, c.name) {
			t.Errorf("%s: takes the chat flags %v, listed as acting as a user %v", c.name, asUser, slices.Contains(userCommands, c.name))
		}
		if asUser && !slices.Contains(said, c.name) {
			t.Errorf("chatctl --help does not say that %s acts as a user:\n%s", c.name, top[i:])
		}
	}
}

// TestACountLimitOrSeqBelowZeroOrATimeoutNotPositiveIsAUsageError: tail
// --count -1 ran until Ctrl-C as if no count was given; inbox and history
// sent a negative --limit, and history a negative --before or --after, to
// chatd to be refused (exit 1, a failure of chatd's); --timeout 0 or
// below gave up at once with "context deadline exceeded". Each is a usage
// error now, before connecting, naming the flag.
func TestACountLimitOrSeqBelowZeroOrATimeoutNotPositiveIsAUsageError(t *testing.T) {
	// No chatd runs: a command that went on to connect would fail with
	// exit 1, not 2.
	env := map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:1", "CHAT_JWT_SECRET": strings.Repeat("s", 32)}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tail", "--user", "1", "--count", "-1"}, "chatctl: tail: --count must not be negative"},
		{[]string{"inbox", "--user", "1", "--limit", "-1"}, "chatctl: inbox: --limit must not be negative"},
		{[]string{"history", "--user", "1", "--conversation", "2", "--limit", "-5"}, "chatctl: history: --limit must not be negative"},
		{[]string{"history", "--user", "1", "--conversation", "2", "--before", "-1"}, "chatctl: history: --before must be a positive seq"},
		{[]string{"history", "--user", "1", "--conversation", "2", "--after", "-1"}, "chatctl: history: --after must be a positive seq"},
		{[]string{"send", "--user", "1", "--peer", "2", "--body", "x", "--timeout", "0"}, "chatctl: send: --timeout must be positive"},
		{[]string{"inbox", "--user", "1", "--timeout", "-1s"}, "chatctl: inbox: --timeout must be positive"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			wantFail(t, chatctl(t, env, c.args...), 2, c.want)
		})
	}
}

// TestAShortSecretIsNamedAsTheCommandsOwnFlag: every command that mints
// its token refuses a --secret chatd would not accept, but the error
// named the token command ("chatctl: token: --secret is 5 bytes") whatever
// command was run.
func TestAShortSecretIsNamedAsTheCommandsOwnFlag(t *testing.T) {
	env := map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "--user", "1", "--secret", "short"}, "chatctl: token: --secret is 5 bytes"},
		{[]string{"send", "--user", "1", "--peer", "2", "--body", "x", "--secret", "short"}, "chatctl: send: --secret is 5 bytes"},
		{[]string{"group", "members", "--user", "1", "--conversation", "2", "--secret", "short"}, "chatctl: group members: --secret is 5 bytes"},
	} {
		r := chatctl(t, env, c.args...)
		wantFail(t, r, 2, c.want)
		if c.args[0] != "token" && strings.Contains(r.stderr, "token: --secret") {
			t.Errorf("%v: the error names the token command:\n%s", c.args, r.stderr)
		}
	}
}

// TestFlagValuesChatctlCanCheckAreRefusedBeforeConnecting: profile --of
// with something that is not a user id, and group update --history with
// neither joined nor all, were checked only once connected (--of) or by
// chatd (--history): with chatd down the command said it could not reach
// chatd (exit 1), with chatd up --history came back as chatd's refusal
// (exit 1). Each is a usage error now, naming the command and the flag,
// as --role's is.
func TestFlagValuesChatctlCanCheckAreRefusedBeforeConnecting(t *testing.T) {
	env := map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:1", "CHAT_JWT_SECRET": strings.Repeat("s", 32)}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"profile", "--user", "1", "--of", "2,x"}, `chatctl: profile: --of: "x" is not a user id`},
		{[]string{"group", "update", "--user", "1", "--conversation", "3", "--history", "sometimes"}, "chatctl: group update: --history must be joined or all"},
		{[]string{"conversation", "create", "--owner", "1", "--members", "2,x"}, `chatctl: conversation create: --members: "x" is not a user id`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			wantFail(t, chatctl(t, env, c.args...), 2, c.want)
		})
	}
}

// TestHelpOfASubcommandShowsThatSubcommand: "chatctl help conversation
// add" showed the subcommands of conversation and "chatctl help migrate
// status" migrate's flags: help passed on the command's name alone, not
// the subcommand after it. It is "chatctl conversation add --help" now.
func TestHelpOfASubcommandShowsThatSubcommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "migrate", "status"}, "Usage: chatctl migrate status "},
		{[]string{"help", "conversation", "add"}, "Usage: chatctl conversation add "},
		{[]string{"help", "group", "role"}, "Usage: chatctl group role "},
		{[]string{"help", "token"}, "Usage: chatctl token "},
	} {
		r := mustOK(t, chatctl(t, nil, c.args...))
		if !strings.HasPrefix(r.stdout, c.want) {
			t.Errorf("chatctl %s printed:\n%s\nwant it to begin %q", strings.Join(c.args, " "), r.stdout, c.want)
		}
	}
}

// TestWhereToSendMustBeAPositiveID: send and forward took a negative
// --conversation or --peer to chatd, which refused it (exit 1, as a
// failure of chatd's), after connecting. A usage error now, as the
// optional ids of the other commands are.
func TestWhereToSendMustBeAPositiveID(t *testing.T) {
	env := map[string]string{"CHAT_MQTT_ADDR": "127.0.0.1:1", "CHAT_JWT_SECRET": strings.Repeat("s", 32)}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--user", "1", "--conversation", "-3", "--body", "x"}, "chatctl: send: --conversation must be a positive id"},
		{[]string{"send", "--user", "1", "--peer", "-2", "--body", "x"}, "chatctl: send: --peer must be a positive id"},
		{[]string{"forward", "--user", "1", "--peer", "-2", "--from-conversation", "1", "--seq", "1"}, "chatctl: forward: --peer must be a positive id"},
		{[]string{"forward", "--user", "1", "--conversation", "-4", "--from-conversation", "1", "--seq", "1"}, "chatctl: forward: --conversation must be a positive id"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			wantFail(t, chatctl(t, env, c.args...), 2, c.want)
		})
	}
}
