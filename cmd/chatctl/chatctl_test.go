package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/auth"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type result struct {
	code           int
	stdout, stderr string
}

// chatctl runs one command line with env as the whole environment.
func chatctl(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, lookupenv: config.MapEnv(env), environ: environ(env)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, args, a)
	return result{code, out.String(), errb.String()}
}

// environ is env as the process's environment list.
func environ(env map[string]string) []string {
	var l []string
	for k, v := range env {
		l = append(l, k+"="+v)
	}
	return l
}

func mustOK(t *testing.T, r result) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

func wantFail(t *testing.T, r result, code int, substrings ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range substrings {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr does not contain %q:\n%s", s, r.stderr)
		}
	}
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, r.stdout)
	}
	return v
}

func TestHelp(t *testing.T) {
	lines := [][]string{
		{"migrate", "--help"},
		{"token", "--help"},
		{"conversation", "--help"},
		{"help", "token"},
	}
	for _, c := range conversationCommands {
		lines = append(lines, []string{"conversation", c.name, "--help"})
	}
	for _, args := range lines {
		r := mustOK(t, chatctl(t, nil, args...))
		if !strings.Contains(r.stdout, "Example:\n  chatctl ") {
			t.Errorf("%v: help has no example:\n%s", args, r.stdout)
		}
	}
	r := mustOK(t, chatctl(t, nil, "--help"))
	for _, c := range commands {
		if !strings.Contains(r.stdout, c.name) {
			t.Errorf("top-level help lacks %s", c.name)
		}
	}
	wantFail(t, chatctl(t, nil), 2, "Usage: chatctl")
	wantFail(t, chatctl(t, nil, "frobnicate"), 2, `unknown command "frobnicate"`)
	wantFail(t, chatctl(t, nil, "conversation", "frobnicate"), 2, `unknown subcommand "frobnicate"`)
	wantFail(t, chatctl(t, nil, "token", "--nope"), 2, "flag provided but not defined: -nope", "Example:")
	wantFail(t, chatctl(t, nil, "token", "--user", "1", "extra"), 2, `unexpected argument "extra"`)
	// A bad setting in the environment is reported with its source
	// (exit 2, a settings error, as for chatd).
	wantFail(t, chatctl(t, map[string]string{"CHAT_MAX_MEMBERS": "x"}, "token", "--user", "1"), 2, "CHAT_MAX_MEMBERS")
	// ... but help still works.
	mustOK(t, chatctl(t, map[string]string{"CHAT_MAX_MEMBERS": "x"}, "token", "--help"))
}

// freshDB is an empty (unmigrated) database in the test cluster.
func freshDB(t *testing.T) string {
	t.Helper()
	c := pgtest.Cluster(t)
	name := fmt.Sprintf("fresh_%d", time.Now().UnixNano())
	if err := c.CreateDatabase(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return c.URL(name)
}

func TestMigrate(t *testing.T) {
	ms, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1]
	url := freshDB(t)
	r := mustOK(t, chatctl(t, nil, "migrate", "--database-url", url))
	for _, m := range ms {
		if !strings.Contains(r.stdout, fmt.Sprintf("applied %s (version %d)", m.Name, m.Version)) {
			t.Errorf("migrate output lacks %s:\n%s", m.Name, r.stdout)
		}
	}
	// Again, through the environment: nothing left to do.
	r = mustOK(t, chatctl(t, map[string]string{"CHAT_DATABASE_URL": url}, "migrate"))
	if want := fmt.Sprintf("nothing to apply: the schema is up to date at version %d", latest.Version); !strings.Contains(r.stdout, want) {
		t.Errorf("second migrate: %q, want %q", r.stdout, want)
	}
	wantFail(t, chatctl(t, nil, "migrate", "--database-url", "host=/nonexistent port=1 user=x dbname=y connect_timeout=1"), 1,
		"CHAT_DATABASE_URL")
}

// statusLine reports whether the output of migrate status has the row of
// version whose columns start with fields.
func statusLine(out string, version int, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > len(fields) && f[0] == fmt.Sprint(version) && slices.Equal(f[1:1+len(fields)], fields) {
			return true
		}
	}
	return false
}

func TestMigrateStatusListsAppliedAndPendingWithChecksums(t *testing.T) {
	ms, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	url := freshDB(t)
	r := mustOK(t, chatctl(t, nil, "migrate", "status", "--database-url", url))
	for _, m := range ms {
		if !statusLine(r.stdout, m.Version, m.Name, "pending", m.Checksum) {
			t.Errorf("status before migrating lacks %s as pending:\n%s", m.Name, r.stdout)
		}
	}
	mustOK(t, chatctl(t, nil, "migrate", "--database-url", url))
	r = mustOK(t, chatctl(t, nil, "migrate", "status", "--database-url", url))
	for _, m := range ms {
		if !statusLine(r.stdout, m.Version, m.Name, "applied", m.Checksum) {
			t.Errorf("status after migrating lacks %s as applied:\n%s", m.Name, r.stdout)
		}
	}
	// An applied migration whose file changed: status says so and fails,
	// and migrate refuses, naming the file.
	edited := ms[0]
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE schema_migrations SET sha256 = 'feed' WHERE version = $1`, edited.Version); err != nil {
		t.Fatal(err)
	}
	r = chatctl(t, nil, "migrate", "status", "--database-url", url)
	wantFail(t, r, 1, "do not match this binary")
	if !statusLine(r.stdout, edited.Version, edited.Name, "edited", "binary", edited.Checksum+",", "applied", "feed") {
		t.Errorf("status of an edited migration:\n%s", r.stdout)
	}
	wantFail(t, chatctl(t, nil, "migrate", "--database-url", url), 1, edited.Name, "was edited after it was applied")
}

// TestMigrateEmbedded runs migrate on the default embedded database, then
// again while another process (standing in for chatd) runs that cluster:
// chatctl must join it, not start a second server or stop the first.
func TestMigrateEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	dataDir := filepath.Join(openTempDir(t), "data")
	env := map[string]string{"CHAT_DATA_DIR": dataDir}

	r := mustOK(t, chatctl(t, env, "migrate"))
	if !strings.Contains(r.stdout, "applied 0001_core.sql (version 1)") {
		t.Fatalf("embedded migrate: %s", r.stdout)
	}
	if _, running, _ := pgembed.FindPostmaster(pgembed.PGDir(dataDir)); running {
		t.Fatal("chatctl left the embedded cluster running")
	}

	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, closeDB, err := pgembed.Open(ctx, "", dataDir, 2, quiet) // "chatd"
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(ctx)
	r = mustOK(t, chatctl(t, env, "migrate"))
	if !strings.Contains(r.stdout, "nothing to apply") || !strings.Contains(r.stderr, "connecting to the running embedded PostgreSQL") {
		t.Fatalf("migrate beside a running cluster:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	r = mustOK(t, chatctl(t, env, "conversation", "create", "--owner", "1", "--title", "t", "--members", "2"))
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("chatctl broke the running cluster: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM conversation").Scan(&n); err != nil || n != 1 {
		t.Fatalf("conversation not written to the running cluster: n=%d err=%v", n, err)
	}
}

func TestToken(t *testing.T) {
	secret := strings.Repeat("k", 32)
	verify := func(t *testing.T, key []byte, tok string, want int64) {
		t.Helper()
		id, err := auth.NewVerifier(key, nil).Verify(strings.TrimSpace(tok))
		if err != nil || id != want {
			t.Fatalf("Verify = %d, %v; want %d", id, err, want)
		}
	}

	r := mustOK(t, chatctl(t, nil, "token", "--user", "42", "--secret", secret, "--ttl", "1h"))
	verify(t, []byte(secret), r.stdout, 42)
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimSpace(r.stdout), &c); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(c.ExpiresAt.Time); left < 59*time.Minute || left > time.Hour+time.Second {
		t.Errorf("--ttl 1h gave a token expiring in %v", left)
	}

	r = mustOK(t, chatctl(t, map[string]string{"CHAT_JWT_SECRET": secret}, "token", "--user", "7"))
	verify(t, []byte(secret), r.stdout, 7)

	dir := t.TempDir()
	fileSecret, err := auth.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	r = mustOK(t, chatctl(t, map[string]string{"CHAT_DATA_DIR": dir}, "token", "--user", "8"))
	verify(t, fileSecret, r.stdout, 8)
	r = mustOK(t, chatctl(t, nil, "token", "--user", "9", "--data-dir", dir))
	verify(t, fileSecret, r.stdout, 9)

	empty := t.TempDir()
	wantFail(t, chatctl(t, nil, "token", "--user", "1", "--data-dir", empty), 1,
		"jwt.secret does not exist", "start chatd once")
	if _, err := os.Stat(filepath.Join(empty, "jwt.secret")); err == nil {
		t.Error("chatctl token created a secret chatd does not know")
	}
	wantFail(t, chatctl(t, nil, "token", "--secret", secret), 2, "--user is required")
	wantFail(t, chatctl(t, nil, "token", "--user", "-3", "--secret", secret), 2, "--user is required")
	wantFail(t, chatctl(t, nil, "token", "--user", "1", "--secret", "short"), 2, "at least 32 bytes")
	wantFail(t, chatctl(t, nil, "token", "--user", "1", "--secret", secret, "--ttl", "-1h"), 2, "--ttl must be positive")
}

type direct struct {
	Created      bool              `json:"created"`
	Conversation chat.Conversation `json:"conversation"`
}

type added struct {
	ConversationID int64       `json:"conversationId"`
	Member         chat.Member `json:"member"`
}

type removed struct {
	ConversationID int64 `json:"conversationId"`
	UserID         int64 `json:"userId"`
	Removed        bool  `json:"removed"`
}

func memberIDs(c chat.Conversation) []int64 {
	var ids []int64
	for _, m := range c.Members {
		ids = append(ids, m.UserID)
	}
	return ids
}

func TestConversation(t *testing.T) {
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_DATABASE_URL": url}
	// Outbox rows on, as a deployment with Kafka has them: chatctl's
	// events go there for the relay (checked at the end).
	if conn, err := pgx.Connect(context.Background(), url); err != nil {
		t.Fatal(err)
	} else {
		_, err = conn.Exec(context.Background(), `SELECT chat_want_outbox()`)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) result { return chatctl(t, env, append([]string{"conversation"}, args...)...) }

	// create
	g := decode[chat.Conversation](t, mustOK(t, run("create", "--owner", "1", "--title", "Team", "--members", "2,3,4")))
	if g.ID <= 0 || g.Type != chat.Group || g.Title != "Team" || len(g.Members) != 4 {
		t.Fatalf("create: %+v", g)
	}
	for _, m := range g.Members {
		if (m.UserID == 1) != (m.Role == chat.RoleOwner) {
			t.Errorf("member %d has role %s", m.UserID, m.Role)
		}
	}
	cid := fmt.Sprint(g.ID)

	// direct: created once, then found.
	d := decode[direct](t, mustOK(t, run("direct", "--user", "1", "--peer", "2")))
	if !d.Created || d.Conversation.Type != chat.Direct || len(d.Conversation.Members) != 2 {
		t.Fatalf("direct: %+v", d)
	}
	d2 := decode[direct](t, mustOK(t, run("direct", "--user", "2", "--peer", "1")))
	if d2.Created || d2.Conversation.ID != d.Conversation.ID {
		t.Fatalf("second direct: %+v, want the same conversation %d", d2, d.Conversation.ID)
	}

	// add (the flag beats the environment: a wrong env URL is overridden).
	a := decode[added](t, mustOK(t, chatctl(t, map[string]string{"CHAT_DATABASE_URL": "host=/nonexistent dbname=x"},
		"conversation", "add", "--conversation", cid, "--actor", "1", "--user", "5", "--database-url", url)))
	if a.ConversationID != g.ID || a.Member.UserID != 5 || a.Member.Role != chat.RoleMember {
		t.Fatalf("add: %+v", a)
	}

	// show
	s := decode[chat.Conversation](t, mustOK(t, run("show", "--conversation", cid, "--user", "5")))
	if fmt.Sprint(memberIDs(s)) != "[1 2 3 4 5]" {
		t.Errorf("show members = %v", memberIDs(s))
	}

	// remove by the owner, then a member leaving.
	rm := decode[removed](t, mustOK(t, run("remove", "--conversation", cid, "--actor", "1", "--user", "5")))
	if !rm.Removed || rm.UserID != 5 || rm.ConversationID != g.ID {
		t.Fatalf("remove: %+v", rm)
	}
	mustOK(t, run("remove", "--conversation", cid, "--actor", "4", "--user", "4"))
	s = decode[chat.Conversation](t, mustOK(t, run("show", "--conversation", cid, "--user", "1")))
	if fmt.Sprint(memberIDs(s)) != "[1 2 3]" {
		t.Errorf("members after removals = %v", memberIDs(s))
	}

	// Events went to the outbox.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var types []string
	rows, err := conn.Query(ctx, "SELECT type FROM outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	types, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ty := range types {
		count[ty]++
	}
	if count[chat.EventConversationCreated] < 2 || count[chat.EventMemberAdded] < 1 || count[chat.EventMemberRemoved] != 2 {
		t.Errorf("outbox events = %v", count)
	}
}

func TestConversationErrors(t *testing.T) {
	url := pgtest.NewDB(t)
	env := map[string]string{"CHAT_DATABASE_URL": url, "CHAT_MAX_MEMBERS": "3"}
	run := func(args ...string) result { return chatctl(t, env, append([]string{"conversation"}, args...)...) }
	g := decode[chat.Conversation](t, mustOK(t, run("create", "--owner", "1", "--title", "T", "--members", "2")))
	cid := fmt.Sprint(g.ID)
	d := decode[direct](t, mustOK(t, run("direct", "--user", "1", "--peer", "2")))
	did := fmt.Sprint(d.Conversation.ID)

	wantFail(t, run("remove", "--conversation", cid, "--actor", "1", "--user", "5"), 1,
		"user 5 is not a member of conversation "+cid,
		"add them first with `chatctl conversation add --conversation "+cid+" --actor 1 --user 5`")
	wantFail(t, run("add", "--conversation", cid, "--actor", "2", "--user", "5"), 1,
		"user 2 is a plain member of conversation "+cid, "rerun with --actor 1")
	wantFail(t, run("add", "--conversation", cid, "--actor", "9", "--user", "5"), 1,
		"user 9 is not a member of conversation "+cid, "its members: 1, 2")
	wantFail(t, run("add", "--conversation", "999999", "--actor", "1", "--user", "5"), 1,
		"conversation 999999 does not exist", "chatctl conversation create")
	wantFail(t, run("remove", "--conversation", cid, "--actor", "2", "--user", "1"), 1,
		"user 1 owns conversation "+cid, "--actor 1 --user 1")
	wantFail(t, run("add", "--conversation", did, "--actor", "1", "--user", "5"), 1,
		"is a direct conversation")
	wantFail(t, run("show", "--conversation", cid, "--user", "9"), 1,
		"user 9 is not a member", "as --user")

	// Member cap (CHAT_MAX_MEMBERS=3): the third fits, the fourth does not.
	mustOK(t, run("add", "--conversation", cid, "--actor", "1", "--user", "3"))
	wantFail(t, run("add", "--conversation", cid, "--actor", "1", "--user", "4"), 1,
		"conversation "+cid+" is full", "chatctl conversation remove")
	wantFail(t, run("create", "--owner", "1", "--title", "big", "--members", "2,3,4"), 1, "max_members")

	// Bad input is caught before the database.
	wantFail(t, run("create", "--title", "x"), 2, "--owner is required")
	wantFail(t, run("create", "--owner", "1", "--members", "2,x"), 2, `"x" is not a user id`)
	wantFail(t, run("direct", "--user", "1", "--peer", "1"), 2, "two different users")
	wantFail(t, run("add", "--conversation", cid, "--actor", "1"), 2, "--user is required")
	wantFail(t, run("create", "--owner", "1", "--title", "bad\x00title"), 1, "title", "--help")
}

// A misspelt --data-dir (or CHAT_DATA_DIR) used to initdb a fresh,
// empty cluster there: "migrate status" (which "changes nothing") then
// listed every migration as pending, and "conversation direct" failed with
// `relation "user_block" does not exist`, each leaving a cluster behind.
// Only "migrate" may create the embedded database; the other commands say
// there is none and what to do.
func TestCommandsOtherThanMigrateOnADataDirWithoutADatabaseCreateNoneAndSaySo(t *testing.T) {
	dataDir := filepath.Join(openTempDir(t), "typo")
	env := map[string]string{"CHAT_DATA_DIR": dataDir}
	for _, args := range [][]string{
		{"migrate", "status"},
		{"conversation", "direct", "--user", "1", "--peer", "2"},
		{"conversation", "create", "--owner", "1", "--title", "t", "--members", "2"},
	} {
		r := chatctl(t, env, args...)
		wantFail(t, r, 1, "no embedded database in "+dataDir, "chatctl migrate")
		if _, err := os.Stat(pgembed.PGDir(dataDir)); err == nil {
			t.Fatalf("%v created a cluster in %s", args, pgembed.PGDir(dataDir))
		}
	}
}

// TestAMistypedVariableIsWarnedAboutAndTheCommandStillRuns: chatctl reads
// chatd's CHAT_ variables, so a misspelt one (CHAT_DATABSE_URL) would
// leave it on a default (the embedded database in ./data) without a word;
// like chatd it names the variable and the setting it resembles.
func TestAMistypedVariableIsWarnedAboutAndTheCommandStillRuns(t *testing.T) {
	secret := strings.Repeat("k", 32)
	r := mustOK(t, chatctl(t, map[string]string{"CHAT_JWT_SECRET": secret, "CHAT_DATABSE_URL": "postgres://db/chat"},
		"token", "--user", "7"))
	if !strings.Contains(r.stderr, "unknown environment variable ignored") ||
		!strings.Contains(r.stderr, "var=CHAT_DATABSE_URL") || !strings.Contains(r.stderr, "did_you_mean=CHAT_DATABASE_URL") {
		t.Errorf("stderr does not warn about CHAT_DATABSE_URL:\n%s", r.stderr)
	}
	if r = mustOK(t, chatctl(t, map[string]string{"CHAT_JWT_SECRET": secret, "CHAT_CONFIG": ""}, "token", "--user", "7")); r.stderr != "" {
		t.Errorf("known variables only, yet stderr says:\n%s", r.stderr)
	}
}

// openTempDir is a temporary directory others may enter: the embedded
// PostgreSQL runs as an unprivileged user when the tests run as root.
func openTempDir(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "chatctl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}

// An operator signs a user out everywhere: the database records the
// revocation every node enforces (server's TestRevokingTokensSignsTheUserOutEverywhere).
func TestRevokeTokensRecordsTheRevocation(t *testing.T) {
	url := pgtest.NewDB(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// The revocation covers the tokens issued until the command ran
	// (until the next whole second): ahead of the database's clock read
	// before it, not of one read after it, which a slow run passes.
	var before time.Time
	if err := conn.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	wantFail(t, chatctl(t, nil, "revoke-tokens", "--database-url", url), 2, "--user is required")
	r := mustOK(t, chatctl(t, nil, "revoke-tokens", "--user", "42", "--database-url", url))
	if !strings.Contains(r.stdout, "tokens of user 42 issued before ") {
		t.Fatalf("revoke-tokens printed %q", r.stdout)
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM token_revocation WHERE user_id = 42 AND revoked_before > $1`, before).Scan(&n); err != nil || n != 1 {
		t.Fatalf("revocations of user 42 ahead of %v: %d, %v", before, n, err)
	}
	// Again: it succeeds, never moving the instant back (docs/http.md).
	r = mustOK(t, chatctl(t, nil, "revoke-tokens", "--user", "42", "--database-url", url))
	if !strings.Contains(r.stdout, "tokens of user 42 issued before ") {
		t.Fatalf("revoke-tokens again printed %q", r.stdout)
	}
}

// chatd refuses a database whose schema is not its own (migrations
// pending, or a newer chatd migrated it), so that a binary never runs SQL
// against tables and functions it does not know. chatctl's database
// commands wrote through the same SQL without that check: against a
// database not migrated yet (or the wrong one) they failed on a missing
// relation, and against one a newer chatd had migrated they ran an older
// binary's statements on it. They now refuse both before touching
// anything, saying what to do; migrate status still reads any database.
func TestDatabaseCommandsRefuseASchemaThatIsNotThisBinarys(t *testing.T) {
	empty := freshDB(t)
	wantFail(t, chatctl(t, nil, "conversation", "create", "--owner", "1", "--title", "T", "--database-url", empty), 1,
		"chatctl migrate")
	if r := chatctl(t, nil, "conversation", "create", "--owner", "1", "--title", "T", "--database-url", empty); strings.Contains(r.stderr, "SQLSTATE") {
		t.Errorf("an unmigrated database answered with PostgreSQL's error:\n%s", r.stderr)
	}
	mustOK(t, chatctl(t, nil, "migrate", "status", "--database-url", empty))

	newer := pgtest.NewDB(t)
	conn, err := pgx.Connect(context.Background(), newer)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO schema_migrations (version, name, sha256) VALUES (9999, '9999_future.sql', 'abc')`); err != nil {
		t.Fatal(err)
	}
	wantFail(t, chatctl(t, nil, "revoke-tokens", "--user", "42", "--database-url", newer), 1, "newer than this binary's")
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM token_revocation`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("revocations written on a newer schema: %d, %v", n, err)
	}
}
