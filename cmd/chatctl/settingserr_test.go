package main

import "testing"

// TestABadSettingInTheEnvironmentExits2AsChatdDoes: a setting chatctl
// reads from chatd's environment that does not load is a settings
// error, exit 2, as it is for chatd (deploy/chatd.service's
// RestartPreventExitStatus=2); 1 is a command that failed.
func TestABadSettingInTheEnvironmentExits2AsChatdDoes(t *testing.T) {
	for _, args := range [][]string{
		{"token", "--user", "1"},
		{"inbox", "--user", "1"},
		{"migrate", "status"},
	} {
		r := chatctl(t, map[string]string{"CHAT_MAX_MEMBERS": "many"}, args...)
		wantFail(t, r, 2, "chatctl: read settings: config: max_members (from env CHAT_MAX_MEMBERS)")
	}
}
