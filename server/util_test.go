package server_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/store"
)

// subprocessEnv is the environment of a chatd test subprocess: the test
// secret, rate limits and presence pushes off (as startNode does in-process),
// the CI-sized send timeout, then extra ("KEY=value").
func subprocessEnv(extra ...string) []string {
	env := append(os.Environ(), "CHAT_JWT_SECRET="+testnode.Secret, "CHAT_SEND_TIMEOUT=20s", "CHAT_PRESENCE_PUSH=false",
		"CHAT_LIMIT_SEND_RATE=0", "CHAT_LIMIT_CONV_RATE=0", "CHAT_LIMIT_CONNECT_RATE=0", "CHAT_LIMIT_API_RATE=0", "CHAT_LIMIT_READ_RATE=0",
		"CHAT_LIMIT_CONNECT_USER_RATE=0", "CHAT_MAX_CONNECTIONS_PER_USER=0", "CHAT_CONNECT_BUDGET_RATE=0", "CHAT_MAX_PENDING_CONNECTS_PER_IP=0",
		"CHAT_MAX_IDLE_HTTP_CONNECTIONS_PER_IP=0")
	return append(env, extra...)
}

// startProcess starts the chatd binary bin with subprocessEnv, MQTT on
// addr, HTTP on a free port and extra, its stderr to stderr (nil:
// discarded), and waits until it accepts MQTT connections. It is killed at
// the end of the test.
func startProcess(t *testing.T, bin, addr string, stderr io.Writer, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = subprocessEnv(append([]string{"CHAT_MQTT_ADDR=" + addr, "CHAT_HTTP_ADDR=" + testkit.FreeAddr(t)}, extra...)...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testkit.WaitFor(t, 30*time.Second, "chatd on "+addr+" to accept connections", func() bool {
		c, _, err := mqtttest.Dial(addr, mqtttest.Options{Version: 5, ClientID: "probe", Password: testnode.Token(t, 99), Clean: true})
		if err == nil {
			c.Disconnect()
		}
		return err == nil
	})
	return cmd
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgembed.OpenPool(context.Background(), url, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func newStore(p *pgxpool.Pool) *store.Store { return store.New(p, chatLimits()) }

func chatLimits() chat.Limits { return chat.DefaultLimits() }
