package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

func TestSendAFileAndDownloadIt(t *testing.T) {
	dataDir := t.TempDir()
	srv := startChatd(t, dataDir)
	env := chatEnv(srv, dataDir)
	env["CHAT_HTTP_ADDR"] = srv.HTTPAddr()
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
