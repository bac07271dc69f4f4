package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress prints one line each second, overwriting itself, until stop.
func (b *bench) progress(w io.Writer, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastAcked, lastDelivered int64
	for {
		select {
		case <-stop:
			fmt.Fprint(w, "\r\033[K")
			return
		case <-t.C:
		}
		acked, delivered := b.t.acked.Load(), b.t.delivered.Load()
		errs := b.t.refused.Load() + b.t.unacked.Load()
		fmt.Fprintf(w, "\r\033[K%5.0fs  %6d acked/s  %7d deliveries/s  sent %d  acked %d  delivered %d  pending %d  errors %d",
			b.t.now().Seconds(), acked-lastAcked, delivered-lastDelivered, b.t.sent.Load(), acked, delivered, b.t.pending(), errs)
		lastAcked, lastDelivered = acked, delivered
	}
}
