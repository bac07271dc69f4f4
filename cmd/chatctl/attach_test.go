package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

func TestSendAFileAndDownloadIt(t *testing.T) {
	_, env := startChatdForFiles(t)
	dir := t.TempDir()
	photo := mediatest.JPEG(400, 300)
	p := filepath.Join(dir, "holiday.jpg")
	if err := os.WriteFile(p, photo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--file", p, "--body", "the view", "--json"))
	sent := decode[struct {
		Seq         int64
		Attachments []struct{ ID, Name string }
	}](t, r)
	if sent.Seq != 1 || len(sent.Attachments) != 1 || sent.Attachments[0].Name != "holiday.jpg" {
		t.Fatalf("send --file: %s", r.stdout)
	}
	id := sent.Attachments[0].ID

	// Into the current directory under its own name.
	wd, _ := os.Getwd()
	if err := os.Chdir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })
	r = mustOK(t, chatctl(t, env, "download", "--user", "2", "--id", id))
	if !strings.Contains(r.stdout, "saved holiday.jpg") {
		t.Fatalf("download: %s", r.stdout)
	}
	if got, _ := os.ReadFile("holiday.jpg"); !bytes.Equal(got, photo) {
		t.Fatal("downloaded bytes differ")
	}
	// A partial file is completed with --resume.
	if err := os.WriteFile("part.jpg", photo[:1000], 0o600); err != nil {
		t.Fatal(err)
	}
	mustOK(t, chatctl(t, env, "download", "--user", "2", "--id", id, "--out", "part.jpg", "--resume"))
	if got, _ := os.ReadFile("part.jpg"); !bytes.Equal(got, photo) {
		t.Fatal("resumed file differs")
	}
	wantFail(t, chatctl(t, env, "download", "--user", "3", "--id", id), 1, "not a member")
	wantFail(t, chatctl(t, env, "download", "--user", "2"), 2, "--id is required")
	html := filepath.Join(dir, "cat.png")
	_ = os.WriteFile(html, mediatest.HTML(), 0o600)
	wantFail(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--file", html), 1, "does not accept")
}

func TestSetAnAvatarFromAFileForTheUserAndForAGroup(t *testing.T) {
	srv, env := startChatdForFiles(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "me.png")
	if err := os.WriteFile(p, mediatest.PNG(64, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustOK(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann", "--avatar-file", p))
	if !strings.Contains(r.stdout, "avatar: /v1/attachments/") {
		t.Fatalf("profile --avatar-file: %s", r.stdout)
	}
	wantFail(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann", "--avatar-file", p, "--avatar", "https://example.com/a.png"), 2, "not both")

	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "hi"))
	g, err := srv.Service.CreateGroup(context.Background(), 1, "Team", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	r = mustOK(t, chatctl(t, env, "group", "update", "--user", "1", "--conversation", strconv.FormatInt(g.ID, 10), "--avatar-file", p))
	if !strings.Contains(r.stdout, `"avatar": "/v1/attachments/`) {
		t.Fatalf("group update --avatar-file: %s", r.stdout)
	}
	pdf := filepath.Join(dir, "me.pdf")
	_ = os.WriteFile(pdf, []byte("%PDF-1.4\n"), 0o600)
	wantFail(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann", "--avatar-file", pdf), 1, "does not accept")
}

// TestAFileThatCannotBeReadIsRefusedBeforeAnythingIsCreatedOrUploaded: send
// opened its --file arguments one by one as it uploaded them, after
// connecting and opening the direct conversation of --peer: a misspelt
// last file left the conversation created and the files before it
// uploaded (charged to the user's daily upload quota), and was reported
// as a failure of the command's (exit 1). Each --file (and --avatar-file)
// is opened before connecting now, a usage error (exit 2) when it cannot
// be read.
func TestAFileThatCannotBeReadIsRefusedBeforeAnythingIsCreatedOrUploaded(t *testing.T) {
	srv, env := startChatdForFiles(t)
	dir := t.TempDir()
	photo := filepath.Join(dir, "holiday.jpg")
	if err := os.WriteFile(photo, mediatest.JPEG(40, 30), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "holiday2.jpg")
	for _, args := range [][]string{
		{"send", "--user", "1", "--peer", "2", "--file", photo, "--file", missing, "--body", "two views"},
		{"send", "--user", "1", "--peer", "2", "--file", dir},
		{"profile", "--user", "1", "--name", "Ann", "--avatar-file", missing},
	} {
		if r := chatctl(t, env, args...); r.code != 2 || !strings.Contains(r.stderr, "chatctl: "+args[0]+": --") {
			t.Errorf("%v: exit %d, want 2 naming the flag\nstderr: %s", args, r.code, r.stderr)
		}
	}
	var convs, uploads int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM conversation), (SELECT count(*) FROM attachment)`).Scan(&convs, &uploads); err != nil {
		t.Fatal(err)
	}
	if convs != 0 || uploads != 0 {
		t.Errorf("after the refused commands: %d conversations and %d uploads, want none", convs, uploads)
	}
}
