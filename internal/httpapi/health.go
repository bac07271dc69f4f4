package httpapi

import (
	"context"
	"net/http"
	"time"

	chat "github.com/chatd/chatd"
)

// readyTimeout bounds the readiness ping: a probe that hangs on a stuck
// database tells the orchestrator nothing, a quick 503 does.
const readyTimeout = 2 * time.Second

// HealthReply is the body of a passing probe.
type HealthReply struct {
	Status string `json:"status"`
}

// healthz is liveness: the process serves HTTP. It deliberately does not
// touch the database, so a database outage never gets chatd restarted.
func healthz(_ *API, _ context.Context) (int, any, error) {
	return http.StatusOK, HealthReply{Status: "ok"}, nil
}

// readyz is readiness: the node is not shutting down and the database
// answers a ping in time. Probes come every few seconds from every
// orchestrator and balancer: a change of state is logged (a warning when
// the ping starts failing, an info line when it answers again), the
// failing probes between them at debug level only.
func readyz(a *API, ctx context.Context) (int, any, error) {
	if a.draining.Load() {
		// Expected for the whole drain, and said once by the stop itself.
		return 0, nil, &apiError{status: http.StatusServiceUnavailable, code: string(chat.CodeUnavailable),
			message: "shutting down, use another node"}
	}
	if a.ready != nil {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		if err := a.ready(ctx); err != nil {
			if !a.notReady.Swap(true) {
				a.log.WarnContext(ctx, "not ready: the database ping failed", "err", err)
			}
			a.log.DebugContext(ctx, "readiness probe failed", "err", err)
			return 0, nil, &apiError{status: http.StatusServiceUnavailable, code: string(chat.CodeUnavailable),
				message: chat.ErrorMessage(chat.Unavailable("database ping", err))}
		}
		if a.notReady.Swap(false) {
			a.log.InfoContext(ctx, "ready again: the database answers")
		}
	}
	return http.StatusOK, HealthReply{Status: "ok"}, nil
}
