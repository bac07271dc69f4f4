package main

import (
	"context"
	"errors"
	"sync"
	"testing"

	chat "github.com/chatd/chatd"
)

type logStore struct {
	chat.Store
	mu   sync.Mutex
	errs map[string]int
}

func (l *logStore) Send(ctx context.Context, req chat.SendRequest) (chat.SendResult, error) {
	res, err := l.Store.Send(ctx, req)
	if err != nil {
		msg := err.Error()
		var ce *chat.Error
		if errors.As(err, &ce) && ce.Err != nil {
			msg = ce.Err.Error()
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = dl
		}
		l.mu.Lock()
		l.errs[msg]++
		l.mu.Unlock()
	}
	return res, err
}

func TestZZDebugSendErrors(t *testing.T) {
	srv, _ := startChatd(t)
	ls := &logStore{Store: srv.Service.Store, errs: map[string]int{}}
	srv.Service.Store = ls
	runBench(t, 1, chatArgs(srv, "-duration", "3s", "-inflight", "2")...)
	t.Logf("errors: %v", ls.errs)
}
