// Command chatctl operates a chatd deployment: it migrates the database,
// mints tokens and manages conversations directly in the database (no MQTT;
// events still go to the outbox, so connected clients hear about them
// through the relay). For people trying chatd, the commands of
// userCommands (send, tail, profile, group, search, ...) act as a user over
// MQTT through package client, with a token minted from chatd's secret, so
// they work against a local chatd as is.
//
// It reads the same settings as chatd (CHAT_* variables and the CHAT_CONFIG
// file) for defaults such as the database and the data dir; its own flags
// override them. Results go to stdout (JSON for conversation commands), logs
// and errors to stderr. Exit status: 0 success, 1 failure, 2 bad usage or a
// setting that does not load (as for chatd).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &app{stdout: os.Stdout, stderr: os.Stderr, stdinR: os.Stdin, lookupenv: os.LookupEnv, environ: os.Environ()})
	stop()
	os.Exit(code)
}
