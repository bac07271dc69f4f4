package broker

import (
	"context"
	"log/slog"
)

// quietHandler filters mochi's logs: it drops the "packet" attribute (mochi
// logs whole packets, message bodies and passwords included, on every hook
// error) and demotes per-connection noise (refused or dropped connections,
// and publishes the chat hook refused on purpose) to debug.
type quietHandler struct{ h slog.Handler }

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool { return q.h.Enabled(ctx, l) }

func (q quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "" || r.Message == "publish packet error" || r.Message == "client disconnected" {
		if !q.h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "packet" && a.Key != "password" && a.Key != "payload" {
			out.AddAttrs(a)
		}
		return true
	})
	return q.h.Handle(ctx, out)
}

func (q quietHandler) WithAttrs(as []slog.Attr) slog.Handler { return quietHandler{q.h.WithAttrs(as)} }
func (q quietHandler) WithGroup(n string) slog.Handler       { return quietHandler{q.h.WithGroup(n)} }
