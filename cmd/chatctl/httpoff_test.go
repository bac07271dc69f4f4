package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chatd/chatd/internal/media/mediatest"
)

// TestWithHTTPAddrOffFileCommandsUseAWebSocketBrokerOrSayWhatToPass: with
// chatd's http_addr off, the commands that move files over its HTTP API
// use the host of a ws:// or wss:// --broker (the listener serving both),
// or stop before connecting, naming the setting and the --http to pass
// (exit 2). They used to go to http://127.0.0.1:8080, where chatd was not
// listening or something else was, after --peer had opened the
// conversation.
func TestWithHTTPAddrOffFileCommandsUseAWebSocketBrokerOrSayWhatToPass(t *testing.T) {
	srv, env := startChatdForFiles(t)
	p := filepath.Join(t.TempDir(), "me.png")
	if err := os.WriteFile(p, mediatest.PNG(64, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	env["CHAT_HTTP_ADDR"] = "off"
	wantFail(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--file", p), 2,
		"chatctl: send: chatd's http_addr (from env CHAT_HTTP_ADDR) is off", "pass --http http://HOST:PORT")
	if convs := conversations(t, srv); convs != 0 {
		t.Errorf("after the refused send: %d conversations, want none", convs)
	}
	wantFail(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann", "--avatar-file", p), 2, "profile: chatd's http_addr")
	wantFail(t, chatctl(t, env, "download", "--user", "1", "--id", "x"), 2, "download: chatd's http_addr")
	// Commands moving no file do not need it.
	mustOK(t, chatctl(t, env, "profile", "--user", "1", "--name", "Ann"))

	ws := "ws://" + srv.HTTPAddr() + "/mqtt"
	r := mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--file", p, "--broker", ws, "--json"))
	id := decode[struct{ Attachments []struct{ ID string } }](t, r).Attachments[0].ID
	mustOK(t, chatctl(t, env, "download", "--user", "2", "--id", id, "--out", "-", "--http", "http://"+srv.HTTPAddr()))

	// With a TLS listener, the URL it names is that listener's.
	env["CHAT_TLS_CERT"], env["CHAT_TLS_KEY"], env["CHAT_HTTPS_ADDR"] = "cert.pem", "key.pem", "0.0.0.0:8443"
	wantFail(t, chatctl(t, env, "download", "--user", "2", "--id", id), 2,
		"pass --http https://HOST:8443 (or --broker wss://HOST:8443/mqtt, which serves both), HOST a name chatd's certificate holds")
}
