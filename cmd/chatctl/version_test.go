package main

import (
	"regexp"
	"testing"
)

// versionLine is "<name> <version> (revision <rev>, <time>) go1.x os/arch".
func versionLine(name string) *regexp.Regexp {
	return regexp.MustCompile(`^` + name + ` \S+ \(revision \S+, \S+\) go\S+ \w+/\w+\n$`)
}

func TestVersionPrintsModuleRevisionAndTime(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		r := mustOK(t, chatctl(t, nil, arg))
		if !versionLine("chatctl").MatchString(r.stdout) {
			t.Errorf("%s printed %q", arg, r.stdout)
		}
	}
	// Even with broken settings: --version reads none.
	mustOK(t, chatctl(t, map[string]string{"CHAT_MAX_MEMBERS": "x"}, "--version"))
}
