package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/testkit"
)

const fcmDevice = `{"platform":"fcm","token":"stolen-phone"}`

// newPushEnv is an env with the device store chatd runs with (FCM tokens
// accepted) and a helper counting lock waits on its database.
func newPushEnv(t *testing.T) (*env, func() int64) {
	t.Helper()
	e := newEnv(t)
	e.svc.Push = push.NewDevices(e.pool, "BKey", true, true)
	return e, func() int64 { return pgtest.LockWaiters(t, e.pool) }
}

func (e *env) devices(user int64) int64 {
	e.t.Helper()
	return pgtest.QueryOne[int64](e.t, e.pool, `SELECT count(*) FROM push_device WHERE user_id = $1`, user)
}

// postDevice sends POST /v1/devices as user with body and returns the
// status (0 and the error when the request failed). Safe off the test's
// goroutine.
func (e *env) postDevice(client *http.Client, user int64, body io.Reader, opts ...reqOpt) (int, error) {
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/devices", body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token(user))
	for _, o := range opts {
		o(req)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// TestARevocationForgetsADeviceWhoseRegistrationWasInProgress: a
// registration authenticated before the user signed out everywhere has
// inserted its device, not committed yet (held by a test trigger after
// its INSERT), when the revocation runs. The revocation waits for it and
// deletes the device: a stolen phone registering at that moment keeps no
// device.
func TestARevocationForgetsADeviceWhoseRegistrationWasInProgress(t *testing.T) {
	e, waiting := newPushEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	release := pgtest.HoldAfterInsert(t, ctx, e.pool, "push_device")
	registered := testkit.Start(t, "the registration", func() (int, error) {
		return e.postDevice(e.srv.Client(), 1, strings.NewReader(fcmDevice))
	}, func() bool { return waiting() == 1 })
	if registered.Returned() {
		t.Fatal("the registration did not wait after its insert")
	}
	revoked := testkit.Start(t, "the revocation", func() (chat.TokensRevoked, error) {
		return e.svc.RevokeTokens(ctx, 1)
	}, func() bool { return waiting() == 2 })
	release()
	if _, err := revoked.Wait(); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if status, err := registered.Wait(); err != nil || (status != http.StatusCreated && status != http.StatusUnauthorized) {
		t.Fatalf("registration: %d %v, want 201 or 401", status, err)
	}
	if n := e.devices(1); n != 0 {
		t.Errorf("the user signed out everywhere and still has %d device(s)", n)
	}
}

// TestARegistrationAuthenticatedBeforeARevocationStoresNoDevice: the
// request's token was checked (the server asked for the body: Expect
// 100-continue), then the user signed out everywhere, then the body
// arrives. The registration is refused 401 and stores nothing. Over RPC
// (a connection authenticated by a token the revocation refuses, not
// closed yet) the same.
func TestARegistrationAuthenticatedBeforeARevocationStoresNoDevice(t *testing.T) {
	e, _ := newPushEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := e.srv.Client().Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = time.Minute // the body waits for the server's 100 Continue
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	pr, pw := io.Pipe()
	type result struct {
		status int
		err    error
	}
	registered := make(chan result, 1)
	go func() {
		s, err := e.postDevice(client, 1, pr, withHeader("Expect", "100-continue"))
		registered <- result{s, err}
	}()
	// The write returns once the client sends the body: after the server
	// answered 100 Continue, which it does when the handler reads the
	// body, after it checked the token.
	if _, err := io.WriteString(pw, fcmDevice[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.RevokeTokens(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(pw, fcmDevice[1:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if r := <-registered; r.err != nil || r.status != http.StatusUnauthorized {
		t.Errorf("registration with a token revoked since it was checked: %d %v, want 401", r.status, r.err)
	}
	if n := e.devices(1); n != 0 {
		t.Errorf("%d device(s) registered with a revoked token", n)
	}

	// RPC: the broker says which token authenticated the connection.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	raw := e.api.RPC(chat.WithTokenIssuedAt(ctx, old), 1, "device.register", []byte(fcmDevice))
	if !strings.HasPrefix(string(raw), `{"status":401,`) {
		t.Errorf("rpc device.register with a revoked token: %s, want 401", raw)
	}
	if n := e.devices(1); n != 0 {
		t.Errorf("%d device(s) registered over RPC with a revoked token", n)
	}
	// A client certificate is no token: no revocation concerns it.
	if raw := e.api.RPC(ctx, 1, "device.register", []byte(fcmDevice)); !strings.HasPrefix(string(raw), `{"status":201,`) {
		t.Errorf("rpc device.register by a connection without a token: %s, want 201", raw)
	}
}
