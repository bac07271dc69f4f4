package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/internal/retry"
)

// nodeLockClass is the first key of the session advisory lock that claims
// a node id ("chnd"); the second is hashtext(node id). The two-key form
// keeps it apart from the relay lease's single bigint key.
const nodeLockClass int32 = 0x63686e64

// nodeLock holds the claim of this node's id on the database for the
// node's life. Everything keyed by the id assumes one node per id: the
// Kafka consumer group ("chatd-<id>", which two nodes would split, each
// getting half of the partitions), the outbox origin (originName, whose
// events a node skips as already delivered, so two nodes would drop each
// other's), the presence marks (which a starting node clears for its id).
type nodeLock struct {
	id     string
	cfg    *pgx.ConnConfig
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	check  time.Duration // pgembed.WaitForNotification's; 0: pgembed.Quiet
}

// claimNodeID takes the node id's lock on a dedicated session, or returns
// a *config.Error when another running node holds it: a setting to fix,
// which no restart cures. While the node runs, a lost session (the
// database restarted, or its host vanished: see keep) is re-claimed with
// backoff. check is how long the session may stay quiet before it must
// answer (0: pgembed.Quiet).
func claimNodeID(ctx context.Context, cfg *pgx.ConnConfig, st config.Settings, log *slog.Logger, check time.Duration) (*nodeLock, error) {
	l := &nodeLock{id: st.NodeID, cfg: cfg, log: log.With("component", "node-lock", "node", st.NodeID), done: make(chan struct{}), check: check}
	conn, got, err := l.try(ctx)
	if err != nil {
		return nil, err
	}
	if !got {
		closeSession(conn)
		return nil, &config.Error{Key: "node_id", Source: st.Source("node_id"),
			Reason: fmt.Sprintf("node id %q is in use by another running node of this database", st.NodeID),
			Fix: "give every node its own id (CHAT_NODE_ID, -node-id or node_id in the YAML file): nodes sharing one " +
				"split its Kafka consumer group, drop each other's events as their own and clear each other's presence"}
	}
	kctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.keep(kctx, conn)
	return l, nil
}

// try opens a session and tries the lock on it; the session is returned
// (open) whenever err is nil.
func (l *nodeLock) try(ctx context.Context) (*pgx.Conn, bool, error) {
	// A vanished node's id is free again for its replacement within
	// about 25 s.
	cfg := l.cfg.Copy()
	pgembed.EndIfClientVanishes(cfg)
	pgembed.Listening(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("claim node id: connect: %w", err)
	}
	var got bool
	err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, nodeLockClass, l.id).Scan(&got)
	if err != nil {
		closeSession(conn)
		return nil, false, fmt.Errorf("claim node id: %w", err)
	}
	return conn, got, nil
}

// keep holds conn until ctx ends; when the session is lost it claims the
// id again, and says loudly when another node took it meanwhile.
func (l *nodeLock) keep(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	for {
		// Returns only when the session fails or ctx ends: nothing
		// LISTENs on it. A session to a database host that vanished
		// fails too, once it stops answering: the server's end of it,
		// and with it the claim, is gone within 25 s
		// (EndIfClientVanishes), and a node that goes on unaware may
		// share its id with a replacement.
		_, err := pgembed.WaitForNotification(ctx, conn, l.check)
		closeSession(conn)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("lost the database session holding the node id's lock; claiming it again", "err", err)
		for fails := 1; ; fails++ {
			if !retry.Sleep(ctx, retry.Backoff(fails, 100*time.Millisecond, 10*time.Second)) {
				return
			}
			c, got, err := l.try(ctx)
			if err != nil {
				continue
			}
			if got {
				conn = c
				l.log.Info("claimed the node id again")
				break
			}
			closeSession(c)
			if fails == 1 || fails%30 == 0 {
				l.log.Error("another node runs with this node id; give every node its own CHAT_NODE_ID", "node_id", l.id)
			}
		}
	}
}

// close releases the claim (ends its session).
func (l *nodeLock) close() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

func closeSession(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
