// Command quickstart is the smallest useful chatd client: it opens the direct
// conversation of two users, sends one message and prints every event the
// user receives until Ctrl-C.
//
// Run it against a local chatd, from the repository root:
//
//	# terminal 1: the server (MQTT on 127.0.0.1:1883, data in ./data)
//	go run ./cmd/chatd
//
//	# terminal 2: user 2 follows their events
//	go run ./cmd/chatctl tail --user 2
//
//	# terminal 3: user 1 says hello to user 2
//	go run ./examples/quickstart --user 1 --peer 2 --token "$(go run ./cmd/chatctl token --user 1)"
//
// chatctl token signs with ./data/jwt.secret, the secret chatd created on
// its first start, so run it from the directory chatd runs in (or pass
// --data-dir). Terminal 3 prints the seq chatd assigned, then the events of
// user 1: its own message, and anything user 2 answers, for example with
//
//	go run ./cmd/chatctl send --user 2 --peer 1 --body "hi back"
//
// Flags: --broker (default mqtt://127.0.0.1:1883; ws://127.0.0.1:8080/mqtt
// works too), --message, --session DIR (keep the session, and any message
// not yet acknowledged, across runs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/chatd/chatd/client"
)

func main() {
	broker := flag.String("broker", "mqtt://127.0.0.1:1883", "chatd MQTT address")
	user := flag.Int64("user", 1, "your user id (the token's subject)")
	peer := flag.Int64("peer", 2, "the user to chat with")
	token := flag.String("token", os.Getenv("CHAT_TOKEN"), "JWT for --user: `go run ./cmd/chatctl token --user 1` (default $CHAT_TOKEN)")
	message := flag.String("message", "hello from the quickstart", "the message to send")
	session := flag.String("session", "", "session directory (optional)")
	flag.Parse()
	if *token == "" {
		fmt.Fprintln(os.Stderr, `quickstart: --token is required: --token "$(go run ./cmd/chatctl token --user 1)"`)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *broker, *user, *peer, *token, *message, *session); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, broker string, user, peer int64, token, message, session string) error {
	c, err := client.New(ctx, client.Config{
		Brokers:    []string{broker},
		UserID:     user,
		Token:      token,
		SessionDir: session,
	})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.AwaitConnection(wait); err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w\nis chatd running? start it with `go run ./cmd/chatd`", err)
		}
		return err
	}

	conv, _, err := c.OpenDirect(ctx, peer)
	if err != nil {
		return fmt.Errorf("open the direct conversation with user %d: %w", peer, err)
	}
	seq, err := c.Send(ctx, conv.ID, message)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	fmt.Printf("sent %q to conversation %d as message #%d; waiting for events (Ctrl-C to stop)\n", message, conv.ID, seq)

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-c.Events():
			if !ok {
				return nil
			}
			switch ev.Type {
			case client.EventMessageNew:
				fmt.Printf("[conv %d #%d] user %d: %s\n", ev.ConversationID, ev.Seq, ev.SenderID, ev.Body)
				// Tell the sender we have read it (debounced, 1s).
				_ = c.MarkRead(ctx, ev.ConversationID, ev.Seq)
			case client.EventReadUpdated:
				fmt.Printf("[conv %d] user %d read up to #%d\n", ev.ConversationID, ev.UserID, ev.Seq)
			case client.EventPresence:
				fmt.Printf("user %d online: %v\n", ev.UserID, ev.Online != nil && *ev.Online)
			default:
				fmt.Printf("[conv %d] %s\n", ev.ConversationID, ev.Type)
			}
		}
	}
}
