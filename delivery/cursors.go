package delivery

import (
	"context"
	"time"

	"github.com/chatd/chatd/store"
)

type cursorKey struct {
	client string
	conv   int64
}

// cursorWriter batches delivered cursors into one upsert per interval: acks
// arrive per message, the database sees one statement per flush.
type cursorWriter struct {
	st   Store
	opts Options
	in   chan store.Cursor
	sync chan chan struct{}
}

func newCursorWriter(st Store, opts Options) *cursorWriter {
	return &cursorWriter{st: st, opts: opts, in: make(chan store.Cursor, 65536), sync: make(chan chan struct{})}
}

// save queues a cursor; when the queue is full it waits briefly, then drops
// it (a lost cursor update only means duplicates after a reconnect).
func (w *cursorWriter) save(c store.Cursor) {
	select {
	case w.in <- c:
	default:
		select {
		case w.in <- c:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// flushNow waits until everything queued before the call is written.
func (w *cursorWriter) flushNow(ctx context.Context) {
	done := make(chan struct{})
	select {
	case w.sync <- done:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (w *cursorWriter) run(ctx context.Context) {
	pending := map[cursorKey]int64{}
	t := time.NewTicker(w.opts.CursorFlush)
	defer t.Stop()
	take := func(c store.Cursor) {
		k := cursorKey{c.ClientID, c.ConversationID}
		if c.Seq > pending[k] {
			pending[k] = c.Seq
		}
	}
	drain := func() {
		for {
			select {
			case c := <-w.in:
				take(c)
			default:
				return
			}
		}
	}
	flush := func(ctx context.Context) {
		drain()
		if len(pending) == 0 {
			return
		}
		batch := make([]store.Cursor, 0, len(pending))
		for k, seq := range pending {
			batch = append(batch, store.Cursor{ClientID: k.client, ConversationID: k.conv, Seq: seq})
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.st.SaveCursors(fctx, batch)
		cancel()
		if err != nil {
			w.opts.Metrics.CursorErrors.Inc()
			w.opts.Logger.Warn("flush delivered cursors failed; will retry", "count", len(batch), "err", err)
			return
		}
		clear(pending)
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			flush(fctx)
			cancel()
			return
		case c := <-w.in:
			take(c)
			if len(pending) >= 4096 {
				flush(ctx)
			}
		case <-t.C:
			flush(ctx)
		case done := <-w.sync:
			flush(ctx)
			close(done)
		}
	}
}
