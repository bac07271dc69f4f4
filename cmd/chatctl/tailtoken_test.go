package main

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/internal/auth"
)

// shortToken is a token for user that chatd accepts for about life: its
// exp lies life - auth.Leeway ahead (chatd refuses a token, and ends the
// connections it authenticated, Leeway after its exp).
func shortToken(secret []byte, user int64, life time.Duration) (string, error) {
	now := time.Now()
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(user, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(life - auth.Leeway)),
	}).SignedString(secret)
}

// countingMints mints tokens that live for life, counting them in n.
func countingMints(n *atomic.Int32, life time.Duration) func(secret []byte, user int64) (string, error) {
	return func(secret []byte, user int64) (string, error) {
		n.Add(1)
		return shortToken(secret, user, life)
	}
}

// chatd ends a connection when its token expires. tail minted one token
// (of an hour) for its whole run: past it every reconnect was refused and
// tail printed nothing more, without a word. It mints a new token for
// each connection now.
func TestTailOutlivesTheTokensItMints(t *testing.T) {
	_, env := startChatdEnv(t)
	var mints atomic.Int32
	stdout, stderr, done := startChatctlMinting(t, env, countingMints(&mints, 4*time.Second), "tail", "--user", "2", "--count", "2")
	waitForText(t, stderr, "following the events of user 2", 15*time.Second)
	start := mints.Load()

	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "before"))
	waitForText(t, stdout, "user 1: before", 15*time.Second)
	// The connection outlived its token and was made again with a new one.
	deadline := time.Now().Add(15 * time.Second)
	for mints.Load() == start {
		if time.Now().After(deadline) {
			t.Fatalf("tail did not connect again, with a new token, within 15 s of connecting with a 4 s one; stderr:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "after"))
	code := waitExit(t, done, 20*time.Second, stdout, stderr, "tail did not print the message sent after its first token expired")
	if code != 0 || !strings.Contains(stdout.String(), "user 1: after") {
		t.Fatalf("tail exited %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// A token given with --token cannot be renewed: once chatd refuses it
// (expired), tail says so and exits 1; it used to go on without a word
// and print nothing.
func TestTailWithATokenThatExpiresSaysSoAndExits(t *testing.T) {
	dataDir := t.TempDir()
	srv := startChatd(t, dataDir)
	secret, err := auth.LoadSecret(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := shortToken(secret, 2, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, done := startChatctl(t, chatEnv(srv, dataDir), "tail", "--user", "2", "--token", tok)
	waitForText(t, stderr, "following the events of user 2", 15*time.Second)
	code := waitExit(t, done, 20*time.Second, stdout, stderr, "tail did not exit after its token expired")
	if code != 1 || !strings.Contains(stderr.String(), "chatd refused --token for user 2") {
		t.Fatalf("tail exited %d; stderr:\n%s", code, stderr)
	}
}

// tail connected with the token it minted (to report a wrong secret at
// once), closed that connection and connected again with a client that
// renews its token: two connections where one does, and events of the
// gap went to a client being closed. It connects once now, with the
// renewing client, and still reports a token chatd refuses at once; a
// message sent as soon as it says it is following is printed.
func TestTailConnectsOnceAndPrintsWhatIsSentOnceItSaysSo(t *testing.T) {
	_, env := startChatdEnv(t)
	var mints atomic.Int32
	stdout, stderr, done := startChatctlMinting(t, env, countingMints(&mints, time.Hour), "tail", "--user", "2", "--count", "1")
	waitForText(t, stderr, "following the events of user 2", 15*time.Second)
	if n := mints.Load(); n != 1 {
		t.Errorf("tail minted %d tokens before following, want 1 (one connection)", n)
	}
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "at once"))
	code := waitExit(t, done, 15*time.Second, stdout, stderr, "tail did not print the message sent once it was following")
	if code != 0 || !strings.Contains(stdout.String(), "user 1: at once") {
		t.Fatalf("tail exited %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	start := time.Now()
	wantFail(t, chatctl(t, env, "tail", "--user", "2", "--secret", strings.Repeat("x", 32)), 1,
		"refused the token for user 2", "--data-dir")
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("tail with a wrong secret took %v to say so, want it at once (not after --timeout)", d)
	}
}
