package main

import (
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
