package broker

import (
	"context"
	"log/slog"

	"github.com/mochi-mqtt/server/v2/packets"
)

// quietHandler filters mochi's logs: it drops every packet attribute (mochi
// logs whole packets, message bodies and passwords included, on every hook
// error as "packet" and on every malformed packet as "pk") and demotes per-connection noise (refused or dropped connections,
// and publishes the chat hook refused on purpose) and mochi's lifecycle
// lines to debug: chatd logs one line per listener and its own start and
// stop instead.
type quietHandler struct{ h slog.Handler }

var mochiLifecycle = map[string]bool{
	"added hook": true, "attached listener": true, "mochi mqtt starting": true, "mochi mqtt server started": true,
	"gracefully stopping server": true, "stopping hook": true, "mochi mqtt server stopped": true,
}

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool { return q.h.Enabled(ctx, l) }

func (q quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "" || r.Message == "publish packet error" || r.Message == "client disconnected" || mochiLifecycle[r.Message] {
		if !q.h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !secretAttr(a) {
			out.AddAttrs(a)
		}
		return true
	})
	return q.h.Handle(ctx, out)
}

// secretAttr reports whether a may carry a message body or a password:
// a packet under any key, or a key that names one.
func secretAttr(a slog.Attr) bool {
	switch a.Key {
	case "packet", "pk", "password", "payload":
		return true
	}
	if a.Value.Kind() == slog.KindAny {
		switch a.Value.Any().(type) {
		case packets.Packet, *packets.Packet:
			return true
		}
	}
	return false
}

func (q quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	kept := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if !secretAttr(a) {
			kept = append(kept, a)
		}
	}
	return quietHandler{q.h.WithAttrs(kept)}
}
func (q quietHandler) WithGroup(n string) slog.Handler { return quietHandler{q.h.WithGroup(n)} }
