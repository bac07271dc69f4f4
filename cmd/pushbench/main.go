//go:build unix

// Command pushbench measures the push hand-off: a chatd node (in this
// process) with -users offline users, each with a Web Push device, in
// -convs groups (one sender, user 1, in all of them), takes -rate messages
// per second for -duration, round robin over the groups; a loopback push
// service in a child process (so its decryption is not counted as chatd's
// CPU) decrypts every push (RFC 8291) and records when it arrived.
//
// It prints the notification latency from the commit of a message to its
// push's arrival at the push service: for wake-ups (the first push of a
// user and conversation, which no minimum interval holds back; the target
// of the design documents is p99 < 5 s) and for every push (the newest
// message it covers), pushes per second, and chatd's CPU time per push.
//
//	go run ./cmd/pushbench                       # 10,000 users, 1,000 groups, 500 msg/s, 60 s
//	go run ./cmd/pushbench -duration 20s -rate 200
//
// Without -database-url it starts a private PostgreSQL (pgembed) with
// fsync on, in a temporary directory, and removes it afterwards.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/benchdb"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/webpushtest"
	"github.com/chatd/chatd/server"
)

type options struct {
	users, convs int
	rate         float64
	duration     time.Duration
	delay        time.Duration
	minInterval  time.Duration
	databaseURL  string
	serve        bool // child: run the loopback push service
	cpuProfile   string
}

func main() {
	var o options
	fs := flag.NewFlagSet("pushbench", flag.ExitOnError)
	fs.IntVar(&o.users, "users", 10000, "offline users, each with one Web Push device")
	fs.IntVar(&o.convs, "convs", 1000, "groups the users are spread over (users/convs recipients each)")
	fs.Float64Var(&o.rate, "rate", 500, "messages per second, round robin over the groups")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long messages are sent")
	fs.DurationVar(&o.delay, "push-delay", 2*time.Second, "CHAT_PUSH_DELAY of the node")
	fs.DurationVar(&o.minInterval, "push-min-interval", 10*time.Second, "CHAT_PUSH_MIN_INTERVAL of the node")
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL to use (default: a private embedded one, fsync on)")
	fs.BoolVar(&o.serve, "serve-endpoint", false, "internal: run the loopback push service (the child process)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write chatd's CPU profile over the load window to this file")
	_ = fs.Parse(os.Args[1:])
	if o.serve {
		serveEndpoint()
		return
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pushbench:", err)
			os.Exit(1)
		}
		defer f.Close()
		// Started here, it includes set-up; the load dominates a 60 s run.
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "pushbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "pushbench:", err)
		os.Exit(1)
	}
}

// serveEndpoint is the child: a loopback push service decrypting with the
// one key pair every device shares (given on stdin), printing its URL.
func serveEndpoint() {
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	var k struct{ Private, Auth []byte }
	if err := json.Unmarshal(in.Bytes(), &k); err != nil {
		fmt.Fprintln(os.Stderr, "pushbench endpoint:", err)
		os.Exit(1)
	}
	sub, err := webpushtest.SubscriberFromBytes(k.Private, k.Auth)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushbench endpoint:", err)
		os.Exit(1)
	}
	ep := webpushtest.NewEndpoint("")
	ep.Default = sub
	fmt.Println(ep.Server.URL)
	// Run until the parent closes stdin.
	_, _ = io.Copy(io.Discard, os.Stdin)
	ep.Close()
}

func startDB(ctx context.Context, o options) (string, func(), error) {
	if o.databaseURL != "" {
		return o.databaseURL, func() {}, nil
	}
	c, stop, err := benchdb.Start(ctx, "pushbench", map[string]string{"max_connections": "100"})
	if err != nil {
		return "", nil, err
	}
	return c.URL("pushbench"), stop, nil
}

func run(ctx context.Context, o options) error {
	if o.users < o.convs || o.convs < 1 || o.rate <= 0 {
		return errors.New("need -users >= -convs >= 1 and -rate > 0")
	}
	url, closeDB, err := startDB(ctx, o)
	if err != nil {
		return err
	}
	defer closeDB()

	sub := webpushtest.NewSubscriber()
	child := exec.Command(os.Args[0], "-serve-endpoint")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return fmt.Errorf("start the loopback push service: %w", err)
	}
	defer func() { stdin.Close(); _ = child.Wait() }()
	keyLine, _ := json.Marshal(map[string][]byte{"Private": sub.Private.Bytes(), "Auth": sub.Auth})
	fmt.Fprintf(stdin, "%s\n", keyLine)
	epURL, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("loopback push service: %w", err)
	}
	epURL = strings.TrimSpace(epURL)

	dataDir, err := os.MkdirTemp("", "pushbench-node")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	env := map[string]string{
		"CHAT_DATABASE_URL": url, "CHAT_DATA_DIR": dataDir,
		"CHAT_MQTT_ADDR": "127.0.0.1:0", "CHAT_HTTP_ADDR": "127.0.0.1:0",
		"CHAT_LIMIT_SEND_RATE": "0", "CHAT_LIMIT_CONV_RATE": "0",
		"CHAT_PUSH_DELAY": o.delay.String(), "CHAT_PUSH_MIN_INTERVAL": o.minInterval.String(),
		"CHAT_PUSH_ALLOW_HTTP": "true", "CHAT_PUSH_QUEUE_SIZE": "5000", "CHAT_MAX_MEMBERS": "100000",
		"CHAT_LOG_LEVEL": "warn",
	}
	st, err := config.Load(nil, config.MapEnv(env))
	if err != nil {
		return err
	}
	srv, err := server.Start(ctx, st, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Close(cctx)
	}()

	fmt.Printf("setup: %d users with a Web Push device in %d groups of %d recipients (+ sender 1)\n", o.users, o.convs, o.users/o.convs)
	convs := make([]int64, o.convs)
	per := o.users / o.convs
	for i := range convs {
		members := make([]int64, per)
		for j := range members {
			members[j] = int64(2 + i*per + j)
		}
		c, err := srv.Service.CreateGroup(ctx, 1, "bench "+strconv.Itoa(i), members)
		if err != nil {
			return fmt.Errorf("create group: %w", err)
		}
		convs[i] = c.ID
	}
	if _, err := srv.Pool.Exec(ctx, `
INSERT INTO push_device (user_id, platform, address, p256dh, auth)
SELECT u, 'webpush', $1 || '/push/u' || u, $2, $3 FROM generate_series(2, $4::bigint + 1) AS u`,
		epURL, sub.P256dh(), sub.AuthB64(), per*o.convs); err != nil {
		return fmt.Errorf("register devices: %w", err)
	}

	type key struct{ conv, seq int64 }
	var (
		mu      sync.Mutex
		commits = map[key]time.Time{}
	)
	fmt.Printf("load: %.0f msg/s for %v; push_delay %v, push_min_interval %v\n", o.rate, o.duration, o.delay, o.minInterval)
	cpu0 := cpuSeconds()
	start := time.Now()
	interval := time.Duration(float64(time.Second) / o.rate)
	var sendWG sync.WaitGroup
	sent, failed := 0, 0
	var sentMu sync.Mutex
	sem := make(chan struct{}, 64)
	for i := 0; time.Since(start) < o.duration && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		sendWG.Add(1)
		go func(conv int64) {
			defer func() { <-sem; sendWG.Done() }()
			res, err := srv.Service.Send(ctx, chat.SendRequest{ConversationID: conv, SenderID: 1, ClientMsgID: uuid.NewString(), Body: "benchmark message"})
			sentMu.Lock()
			defer sentMu.Unlock()
			if err != nil {
				failed++
				return
			}
			sent++
			mu.Lock()
			commits[key{conv, res.Message.Seq}] = res.Message.CreatedAt
			mu.Unlock()
		}(convs[i%len(convs)])
	}
	sendWG.Wait()
	loadEnd := time.Now()
	// Pushes still due: the delay, and the interval's held-back counts.
	drain := o.delay + o.minInterval + 5*time.Second
	fmt.Printf("sent %d messages (%d failed) in %v; waiting %v for the last pushes\n", sent, failed, loadEnd.Sub(start).Round(time.Millisecond), drain)
	select {
	case <-time.After(drain):
	case <-ctx.Done():
	}
	cpu := cpuSeconds() - cpu0
	window := time.Since(start)

	resp, err := http.Get(epURL + "/receipts")
	if err != nil {
		return err
	}
	var recs []webpushtest.Receipt
	err = json.NewDecoder(resp.Body).Decode(&recs)
	resp.Body.Close()
	if err != nil {
		return err
	}
	type pair struct {
		path string
		conv int64
	}
	seen := map[pair]bool{}
	var wake, all []time.Duration
	covered := 0
	first, last := time.Time{}, time.Time{}
	slices.SortFunc(recs, func(a, b webpushtest.Receipt) int { return int(a.AtUnixNano - b.AtUnixNano) })
	for _, r := range recs {
		var n push.Notification
		if json.Unmarshal([]byte(r.Plaintext), &n) != nil {
			continue
		}
		at := time.Unix(0, r.AtUnixNano)
		if first.IsZero() {
			first = at
		}
		last = at
		covered += n.Count
		mu.Lock()
		newest, ok := commits[key{n.ConversationID, n.Seq}]
		oldest, ok2 := commits[key{n.ConversationID, n.Seq - int64(n.Count) + 1}]
		mu.Unlock()
		if ok {
			all = append(all, at.Sub(newest))
		}
		p := pair{r.Path, n.ConversationID}
		if !seen[p] && ok2 {
			wake = append(wake, at.Sub(oldest))
		}
		seen[p] = true
	}
	fmt.Printf("\npushes: %d to %d devices, covering %d message deliveries (%d messages x %d recipients = %d)\n",
		len(recs), len(seen), covered, sent, per, sent*per)
	if span := last.Sub(first).Seconds(); span > 0 {
		fmt.Printf("pushes per second: %.0f (first to last push), %.0f over the load window\n", float64(len(recs))/span, float64(len(recs))/window.Seconds())
	}
	fmt.Printf("wake-up latency, commit -> push service (first push of each user): %s\n", percentiles(wake))
	fmt.Printf("latency of every push, commit of its newest message -> push service: %s\n", percentiles(all))
	if len(recs) > 0 {
		fmt.Printf("chatd CPU: %.1f s over %v (%.0f%% of one core), %.0f µs per push (sends, decisions and Web Push encryption included)\n",
			cpu, window.Round(time.Second), 100*cpu/window.Seconds(), 1e6*cpu/float64(len(recs)))
	}
	return nil
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration {
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(time.Millisecond)
	}
	return fmt.Sprintf("n=%d p50 %v p90 %v p99 %v max %v", len(ds), q(0.5), q(0.9), q(0.99), ds[len(ds)-1].Round(time.Millisecond))
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
